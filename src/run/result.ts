// Every RunResult is made here: a run that ended, one refused or canceled before anything was launched,
// one whose cgroup could not be made, and a call whose reply made it an error. Each comes out redacted,
// so nothing reaches the caller with a secret in it. (The result's types are policy/result.ts.)

import { recentCapabilities } from '../host/capabilities.js'
import type { CgroupUsage } from '../host/cgroup-files.js'
import { type ProxyEvent, showEvents } from '../net/events.js'
import { tierFor } from '../plan/plan.js'
import type { Isolation, RunResult, Violation } from '../policy/result.js'
import type { Encoding, LogEntry, OutputData } from '../policy/schema.js'
import type { Ending } from './outcome.js'
import type { OutputViews } from './output.js'
import { type Redaction, redactResult } from './redact.js'

/** The result of a run that ended before anything was launched: nothing ran, nothing was measured. */
export function emptyResult(isolation: Isolation, violation: Violation): RunResult
export function emptyResult(
  isolation: Isolation,
  violation: Violation,
  encoding: Encoding,
): RunResult<OutputData>
export function emptyResult(
  isolation: Isolation,
  violation: Violation,
  encoding: Encoding = 'utf8',
): RunResult<OutputData> {
  const none = () => (encoding === 'buffer' ? Buffer.alloc(0) : '')
  return {
    status: violation.kind,
    exitCode: null,
    signal: null,
    stdout: none(),
    stderr: none(),
    output: none(),
    truncated: false,
    outputBytes: 0,
    wallMs: 0,
    cpuMs: null,
    maxRssBytes: null,
    isolation,
    violation,
    perProcessLimits: [],
    logs: [],
    logsTruncated: false,
    network: [],
    networkDropped: 0,
  }
}

/** A run refused (or canceled, or failed) before anything was launched. */
export function unstartedResult(
  isolation: Isolation,
  violation: Violation,
  encoding: Encoding,
  redaction: Redaction,
): RunResult<OutputData> {
  return redactResult(emptyResult(isolation, violation, encoding), redaction)
}

/** What a run that was launched leaves, at its end. */
export interface RunEnd {
  ending: Pick<Ending, 'status' | 'violation' | 'exitCode' | 'signal'>
  /** The output kept, and how much of it (OutputBuffer's counts). */
  output: OutputViews<OutputData>
  kept: { truncated: boolean; bytes: number }
  logs: { entries: LogEntry[]; truncated: boolean }
  /** The allowlist's proxies, when the run had them: their events with each host as received. */
  network: { events: readonly ProxyEvent[]; dropped: number } | null
  /** The cgroup's counters, when the sandbox had one. */
  usage: CgroupUsage | null
  wallMs: number
  isolation: Isolation
  perProcessLimits: RunResult['perProcessLimits']
}

export function finishedResult(end: RunEnd, redaction: Redaction): RunResult<OutputData> {
  const { ending, usage } = end
  return redactResult(
    {
      status: ending.status,
      exitCode: ending.exitCode,
      signal: ending.signal,
      ...end.output,
      truncated: end.kept.truncated,
      outputBytes: end.kept.bytes,
      wallMs: Math.round(end.wallMs),
      cpuMs: usage?.cpuMs ?? null,
      maxRssBytes: usage?.maxRssBytes ?? null,
      isolation: end.isolation,
      violation: ending.violation,
      perProcessLimits: end.perProcessLimits,
      logs: end.logs.entries,
      logsTruncated: end.logs.truncated,
      // Each host redacted as the bytes it was (a cut one hidden at the cut too), then escaped to be shown.
      network: showEvents(end.network?.events ?? [], (raw, cut) => redaction.forRawHosts().apply(raw, cut)),
      networkDropped: end.network?.dropped ?? 0,
    },
    redaction,
  )
}

/**
 * `result` made an error of `limit` (a called function's reply refused, say), everything else kept; redacted
 * again when the message may carry what the sandbox said.
 */
export function withError<T extends RunResult<OutputData>>(
  result: T,
  limit: string,
  message: string,
  redaction?: Redaction,
): T {
  const failed: T = { ...result, status: 'error', violation: { kind: 'error', limit, message } }
  return redaction ? redactResult(failed, redaction) : failed
}

/**
 * The one result of a run cordon could not make at all (status `error`): what a face answers with when it
 * promises a result whatever happens (`cordon run --json` on a bad flag; an HTTP API on a bad request).
 * `limit` names what is at fault (a field, a flag, `runner`); `isolation` is the request's own, anything
 * but a tier's name counting as `auto`, and the result says the tier that would have run.
 */
export function errorResult(
  limit: string,
  message: string,
  options?: { isolation?: unknown; encoding?: 'utf8' },
): RunResult
export function errorResult(
  limit: string,
  message: string,
  options: { isolation?: unknown; encoding: 'buffer' },
): RunResult<Buffer>
export function errorResult(
  limit: string,
  message: string,
  options: { isolation?: unknown; encoding?: Encoding },
): RunResult<OutputData>
export function errorResult(
  limit: string,
  message: string,
  options: { isolation?: unknown; encoding?: Encoding } = {},
): RunResult<OutputData> {
  const { isolation, encoding = 'utf8' } = options
  const asked = isolation === 'namespace' || isolation === 'process' ? isolation : 'auto'
  return emptyResult(tierFor(asked, recentCapabilities()), { kind: 'error', limit, message }, encoding)
}
