// The supervisor: spawn → stream → enforce → classify. Everything with processes and timers is here.
import { type ChildProcess, spawn } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import type { Readable } from 'node:stream'
import { probeCapabilities } from '../plan/capabilities.js'
import { type LaunchPlan, prepare } from '../plan/plan.js'
import {
  type OutputChunk,
  type Policy,
  parseCommand,
  parsePolicy,
  type RunOptions,
} from '../policy/schema.js'
import { classify, effectiveSignal } from './classify.js'
import { namespaceProcesses, processTierProcesses, reap, type SandboxProcesses } from './kill.js'
import { OutputBuffer } from './output.js'
import { livingByUid, signal as signalPids } from './procs.js'
import { ChunkQueue } from './queue.js'
import type { Isolation, RunResult, Violation } from './result.js'

export interface RunHandle {
  /** Host pid of the launched process (bwrap's monitor in the namespace tier); undefined if none ran. */
  readonly pid: number | undefined
  /** Output chunks as they arrive; ends when the sandbox has finished. */
  readonly output: AsyncIterable<OutputChunk>
  /** Write to the sandbox's stdin (only when `stdin` was not given: it then stays open until closeStdin). */
  write(data: string | Buffer): boolean
  closeStdin(): void
  /** Stop the sandbox (SIGTERM, then SIGKILL after killGraceMs); the result's status becomes `canceled`. */
  kill(): void
  readonly result: Promise<RunResult>
}

type StopReason = 'timeout' | 'output-limit' | 'canceled'

function emptyResult(isolation: Isolation, violation: Violation): RunResult {
  return {
    status: violation.kind,
    exitCode: null,
    signal: null,
    stdout: '',
    stderr: '',
    output: '',
    truncated: false,
    outputBytes: 0,
    wallMs: 0,
    cpuMs: null,
    maxRssBytes: null,
    isolation,
    violation,
  }
}

function refusedHandle(result: RunResult): RunHandle {
  return {
    pid: undefined,
    output: { async *[Symbol.asyncIterator]() {} },
    write: () => false,
    closeStdin() {},
    kill() {},
    result: Promise.resolve(result),
  }
}

/**
 * Start a sandboxed command; throws PolicyError for invalid options. Without `stdin` the sandbox's stdin
 * stays open for `write()` until `closeStdin()`.
 */
export function start(command: readonly string[], options: RunOptions = {}): RunHandle {
  return launch(command, options, true)
}

/** Run a sandboxed command to completion. Without `stdin` the sandbox reads EOF at once. */
export async function run(command: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return launch(command, options, false).result
}

function launch(command: readonly string[], options: RunOptions, keepStdinOpen: boolean): RunHandle {
  const argv = parseCommand(command)
  const policy = parsePolicy(options)
  const prepared = prepare(argv, policy, probeCapabilities())
  if (prepared.kind === 'refused') return refusedHandle(emptyResult(prepared.tier, prepared.violation))
  if (policy.signal?.aborted) {
    prepared.plan.lease?.release()
    return refusedHandle(
      emptyResult(prepared.plan.tier, {
        kind: 'canceled',
        limit: 'signal',
        message: 'canceled before start',
      }),
    )
  }
  return supervise(prepared.plan, policy, keepStdinOpen && policy.stdin === undefined)
}

function feedStdin(child: ChildProcess, stdin: Policy['stdin'], keepOpen: boolean): void {
  const pipe = child.stdin
  if (!pipe) return
  pipe.on('error', () => {}) // the sandbox may exit without reading its input (EPIPE)
  if (stdin === undefined) {
    if (!keepOpen) pipe.end()
  } else if (typeof stdin === 'string' || Buffer.isBuffer(stdin)) {
    pipe.end(stdin)
  } else {
    ;(stdin as Readable).on('error', () => pipe.end()).pipe(pipe)
  }
}

function supervise(plan: LaunchPlan, policy: Policy, keepStdinOpen: boolean): RunHandle {
  const { limits } = policy
  const uid = plan.lease?.uid ?? null
  // A uid left with processes by a host that died mid-run gets a clean slate.
  if (uid !== null) signalPids(livingByUid(uid), 'SIGKILL')

  const queue = new ChunkQueue<OutputChunk>()
  const out = new OutputBuffer(limits.maxOutputBytes, (chunk) => {
    queue.push(chunk)
    policy.onOutput?.(chunk)
  })
  const started = performance.now()
  const child = spawn(plan.file, plan.args, {
    cwd: plan.cwd,
    env: plan.env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true, // own session and process group, away from the host's terminal
    ...(plan.lease ? { uid: plan.lease.uid, gid: plan.lease.gid } : {}),
  })
  const procs: SandboxProcesses | null =
    child.pid === undefined
      ? null
      : plan.tier === 'namespace'
        ? namespaceProcesses(child.pid, uid)
        : processTierProcesses(child.pid, uid)

  let stoppedFor: StopReason | null = null
  let launchError: string | null = null
  let graceTimer: NodeJS.Timeout | undefined
  const stop = (reason: StopReason, graceful: boolean) => {
    if (stoppedFor || !procs) return
    stoppedFor = reason
    if (!graceful) return procs.kill()
    procs.term()
    graceTimer = setTimeout(() => procs.kill(), limits.killGraceMs)
  }
  const wallTimer = setTimeout(() => stop('timeout', true), limits.wallTimeMs)
  const onAbort = () => stop('canceled', true)
  policy.signal?.addEventListener('abort', onAbort, { once: true })

  child.stdout!.on('data', (b: Buffer) => out.push('stdout', b) || stop('output-limit', false))
  child.stderr!.on('data', (b: Buffer) => out.push('stderr', b) || stop('output-limit', false))
  feedStdin(child, policy.stdin, keepStdinOpen)

  const result = new Promise<RunResult>((resolve) => {
    let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null
    let wallMs = 0
    child.on('error', (error) => {
      launchError ??= `could not launch ${plan.file}: ${error.message}`
    })
    child.on('exit', (code, sig) => {
      exited = { code, signal: sig }
      wallMs = performance.now() - started
      // Background children may still hold the pipes open; they are part of the sandbox and go now.
      if (plan.tier === 'process') procs?.kill()
    })
    child.on('close', async (code, sig) => {
      clearTimeout(wallTimer)
      clearTimeout(graceTimer)
      policy.signal?.removeEventListener('abort', onAbort)
      if (procs && (plan.tier === 'process' || stoppedFor)) await reap(procs, 5000)
      plan.lease?.release()
      exited ??= { code, signal: sig }
      let exitCode = exited.code
      let signal: string | null = exited.signal
      // bwrap reports a signal death of the program as 128+N; undo that so both tiers look alike.
      if (plan.tier === 'namespace' && signal === null) {
        signal = effectiveSignal(exitCode, null)
        if (signal) exitCode = null
      }
      const { status, violation } = classify({
        exitCode,
        signal,
        stoppedFor,
        stderrTail: out.stderrTail,
        limits,
        launchError,
      })
      const text = out.finish()
      queue.end()
      resolve({
        status,
        exitCode,
        signal,
        ...text,
        truncated: out.truncated,
        outputBytes: out.bytes,
        wallMs: Math.round(wallMs || performance.now() - started),
        cpuMs: null,
        maxRssBytes: null,
        isolation: plan.tier,
        violation,
      })
    })
  })

  return {
    pid: child.pid,
    output: queue,
    write: (data) => (keepStdinOpen && child.stdin?.writable ? child.stdin.write(data) : false),
    closeStdin: () => child.stdin?.end(),
    kill: () => stop('canceled', true),
    result,
  }
}
