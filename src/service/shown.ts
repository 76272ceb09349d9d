// What the API shows of a run's request, which it otherwise never shows (it holds the client's files, its
// stdin, its `env` and `redact`, and is up to 8 MiB): its command, redacted by the run's own redaction and
// cut, kept with the run when it is made (what a list shows of each run: RunRecord.cmd); and a summary of
// the rest for the run's page (the limits in force, the network, the names of its files and variables),
// never a value of its `env`, its `redact` strings, its files' contents, its stdin or its webhook's URL.
import { policySchema, redactorFor } from '../index.js'
import type { HostOptions, RunRequest } from './request.js'
import type { KeyRecord } from './types.js'
import { secretsOf } from './worker.js'

/** Characters of a command kept to show, in all: an agent's `sh -c` scripts run to kilobytes each. */
export const SHOWN_CMD_CHARS = 1000

/** `cmd` within `chars` characters in all: the arguments that fit, the last one cut (with `…`). */
export function cutCommand(cmd: readonly string[], chars = SHOWN_CMD_CHARS): string[] {
  const out: string[] = []
  let left = chars
  for (const arg of cmd) {
    if (arg.length > left) {
      out.push(`${arg.slice(0, Math.max(0, left))}…`)
      break
    }
    out.push(arg)
    left -= arg.length + 1
  }
  return out
}

/** Builds the run's redaction (its `redact`, its secret-named `env` values, the key's secrets): its text(). */
function redactionOf(request: RunRequest, key: KeyRecord, host?: HostOptions): (text: string) => string {
  const redactor = redactorFor(secretsOf({ request, key, ...(host ? { host } : {}) }))
  return redactor.active ? redactor.text : (text) => text
}

/**
 * The command as a run shows it: each argument redacted by the run's own redaction, whole, then the
 * command cut (a secret cut first would leave its start to be read).
 */
export function shownCommand(request: RunRequest, key: KeyRecord, host?: HostOptions): string[] {
  const hide = redactionOf(request, key, host)
  return cutCommand(request.cmd.map(hide))
}

/** The library's default limits: what a request that sets none runs with. */
const DEFAULT_LIMITS = policySchema.shape.limits.parse({})

/** A run's request as its page shows it (`GET /v1/runs/{id}/request`). */
export interface ShownRequest {
  /** The command as the run's views show it (redacted, cut). */
  cmd: string[]
  /** Every limit the run ran under: the request's, within its key's ceilings, the defaults for the rest. */
  limits: Record<string, number>
  /** `none`, `host`, or the allowlist (its hosts redacted). */
  network: unknown
  isolation: string
  rootfs: string | null
  mergeOutput: boolean
  /** The names of the variables it set (never their values), and how many strings it redacts. */
  env: string[]
  redact: number
  files: { path: string; bytes: number; mode: number | null }[]
  collect: string[]
  /** What its stdin was: none, text or bytes (with their size), or `open`. */
  stdin: { kind: 'none' | 'text' | 'bytes' | 'open'; bytes: number }
  /** Whether a webhook is sent (its URL may carry a token: not shown). */
  webhook: boolean
}

/** `request` as the run's page shows it: nothing of its values but its limits and its names, redacted. */
export function shownRequest(
  request: RunRequest,
  shownCmd: string[],
  key: KeyRecord,
  host?: HostOptions,
): ShownRequest {
  const hide = redactionOf(request, key, host)
  const options = request.options
  const network = options.network ?? 'none'
  const stdin = request.stdin
  return {
    cmd: shownCmd,
    limits: { ...DEFAULT_LIMITS, ...(options.limits ?? {}) },
    network:
      typeof network === 'string'
        ? network
        : { ...network, allow: network.allow.map(hide), deny: network.deny.map(hide) },
    isolation: options.isolation ?? 'auto',
    rootfs: typeof options.rootfs === 'string' ? options.rootfs : null,
    mergeOutput: options.mergeOutput === true,
    env: Object.keys(options.env ?? {}).sort(),
    redact: (options.redact ?? []).length,
    files: request.files.map((f) => ({
      path: hide(f.path),
      bytes: f.encoding === 'base64' ? Buffer.byteLength(f.content, 'base64') : Buffer.byteLength(f.content),
      mode: f.mode ?? null,
    })),
    collect: request.collect.map(hide),
    stdin:
      stdin === undefined
        ? { kind: 'none', bytes: 0 }
        : stdin === 'open'
          ? { kind: 'open', bytes: 0 }
          : typeof stdin === 'string'
            ? { kind: 'text', bytes: Buffer.byteLength(stdin) }
            : { kind: 'bytes', bytes: Buffer.byteLength(stdin.base64, 'base64') },
    webhook: request.webhook !== undefined,
  }
}
