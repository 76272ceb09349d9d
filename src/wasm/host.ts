// The host's side of one guest run: every host call lands here, whichever runtime carries it (a worker
// thread, or a sandboxed node process on a socket). It keeps what the guest is owed and what it has done:
// the clock, the exec quota and records, its logs and output within their caps, the count of its calls.
// Every exec is a run() with the caller's exec options; nothing here trusts the guest's side: a call's
// name must be one of the module's imports, its values integers, its bytes within MAX_CALL_BYTES.
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, statSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { StringDecoder } from 'node:string_decoder'
import {
  type LogEntry,
  type OutputChunk,
  PolicyError,
  type RunOptions,
  type RunResult,
  removeWrittenTree,
  run,
  type Violation,
} from '../index.js'
import {
  type ExecOutcome,
  type ExecRequest,
  type HostContext,
  type HostHandler,
  type HostReply,
  MAX_CALL_BYTES,
} from './abi.js'
import { GuestClock } from './clock.js'
import { hostHandlers } from './imports/sets.js'
import type { ImportInfo } from './module.js'
import { clockSpec, type WasmPolicy } from './options.js'
import type { ExecRecord } from './result.js'

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const
const MAX_NAME = 128
const MAX_VALUES = 8

export class HostSession implements HostContext {
  readonly clock: GuestClock
  readonly args: readonly string[]
  readonly environ: readonly string[]
  readonly outputOverflow: 'truncate' | 'error'
  readonly hostCalls = new Map<string, number>()
  calls = 0
  readonly logs: LogEntry[] = []
  logsTruncated = false
  private logBytes = 0
  private readonly kept = { stdout: [] as Buffer[], stderr: [] as Buffer[] }
  private readonly live = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') }
  outputBytes = 0
  truncated = false
  readonly execs: ExecRecord[] = []
  execCount = 0
  /** An exec's options the engine refused (the caller's input, e.g. an allow entry naming nothing). */
  fatal: PolicyError | null = null
  private readonly handlers: Map<string, HostHandler>
  private busy = false
  private inFlight: Promise<unknown> | null = null
  private readonly abort = new AbortController()
  /** Made at the first exec (when the caller gave no cwd): the execs' cwd and writable directory. */
  private workspace: { root: string; dir: string } | null = null

  constructor(
    private readonly policy: WasmPolicy,
    imports: readonly ImportInfo[],
    /** Stop the guest: a limit or a protocol breach; the first violation stands. */
    private readonly stop: (violation: Violation) => void,
  ) {
    this.clock = new GuestClock(clockSpec(policy.clock))
    this.args = policy.argv ?? []
    this.environ = Object.entries(policy.environ).map(([k, v]) => `${k}=${v}`)
    this.outputOverflow = policy.exec.outputOverflow
    this.handlers = hostHandlers(this, imports)
  }

  /**
   * One host call from the guest's side, as it arrived (unvalidated). Null: no answer, the guest is being
   * stopped (a breach, a limit). One call at a time: the guest's side blocks on each.
   */
  async handle(raw: unknown): Promise<HostReply | null> {
    const call = parseCall(raw)
    const handler = call && this.handlers.get(call.name)
    if (!call || !handler) return this.breach(`an invalid host call (${describe(raw)})`)
    if (this.busy) return this.breach('a host call while another was in flight')
    if (++this.calls > this.policy.limits.maxHostCalls) {
      const limit = this.policy.limits.maxHostCalls
      this.stop({
        kind: 'error',
        limit: 'maxHostCalls',
        message: `the guest made more than ${limit} host calls`,
      })
      return null
    }
    this.hostCalls.set(call.name, (this.hostCalls.get(call.name) ?? 0) + 1)
    this.busy = true
    try {
      return await handler(call.values, call.bytes)
    } catch (error) {
      if (error instanceof PolicyError) {
        this.fatal ??= error
        this.stop({ kind: 'error', limit: error.field, message: error.message })
        return null
      }
      return this.breach(`a host call the host could not answer: ${(error as Error).message}`)
    } finally {
      this.busy = false
    }
  }

  private breach(message: string): null {
    this.stop({ kind: 'error', limit: 'host-call', message: `the guest's runtime made ${message}` })
    return null
  }

  execState() {
    const max = this.policy.exec.maxExecs
    return { enabled: max > 0, count: this.execCount, remaining: max > 0 ? max - this.execCount : null }
  }

  async exec(request: ExecRequest): Promise<ExecOutcome> {
    const { maxExecs, onQuota, envAllow, options } = this.policy.exec
    if (maxExecs === 0) return { kind: 'disabled' }
    if (this.execCount >= maxExecs) {
      if (onQuota === 'stop')
        this.stop({
          kind: 'process-limit',
          limit: maxExecs,
          message: `the guest asked for more than ${maxExecs} execs`,
        })
      return { kind: 'quota', maxExecs }
    }
    // Counted once admitted, whatever run() then says: a guest looping on a denied command meets the quota.
    const n = ++this.execCount
    const command = request.argv[0] ?? ''
    const refused = (message: string): ExecOutcome => {
      this.record(n, command, null, message, 0, 0)
      return { kind: 'invalid', message }
    }
    if (command === '') return refused('the command is empty')
    if (request.argv.some((a) => a.includes('\0'))) return refused('the command or an argument contains NUL')
    const allowed = new Set(envAllow)
    const env: Record<string, string> = {}
    const dropped: string[] = []
    for (const [k, v] of request.env) {
      if (!allowed.has(k)) dropped.push(k)
      else if (v.includes('\0')) return refused(`env ${k} contains NUL`)
      else env[k] = v
    }
    // Names only, never their values: a value may be a secret.
    if (dropped.length > 0)
      this.note(`exec ${n}: dropped env ${[...new Set(dropped)].join(', ')} (not in exec.envAllow)`)
    let where: Pick<RunOptions, 'cwd' | 'writable'>
    try {
      where = this.where(request.workingDirectory)
    } catch (error) {
      return refused((error as Error).message)
    }
    const signal = options.signal ? AbortSignal.any([options.signal, this.abort.signal]) : this.abort.signal
    const started = performance.now()
    const running = run(request.argv, {
      ...options,
      ...where,
      env: { ...(options.env ?? {}), ...env },
      stdin: request.stdin ? Buffer.from(request.stdin) : '',
      encoding: 'buffer',
      signal,
    })
    this.inFlight = running.catch(() => undefined)
    let result: RunResult<Buffer>
    try {
      result = await running
    } finally {
      this.inFlight = null
    }
    const wallMs = Math.round(performance.now() - started)
    const durationMs = this.clock.execDuration() ?? result.wallMs
    this.record(n, command, result, null, wallMs, durationMs)
    return { kind: 'ran', result, durationMs }
  }

  private record(
    n: number,
    command: string,
    result: RunResult<Buffer> | null,
    refusal: string | null,
    wallMs: number,
    durationMs: number,
  ): void {
    const record: ExecRecord = {
      n,
      command,
      status: result?.status ?? 'error',
      exitCode: result?.exitCode ?? null,
      wallMs: result?.wallMs ?? wallMs,
      durationMs,
      outputBytes: result?.outputBytes ?? 0,
      truncated: result?.truncated ?? false,
      violation: result ? result.violation : { kind: 'error', limit: 'request', message: refusal ?? '' },
      atMs: this.clock.peekMs(),
    }
    this.execs.push(record)
    this.policy.onExec?.(record)
  }

  /** The exec's cwd and writable paths: the workspace (made now), or the caller's cwd; a request's dir inside it. */
  private where(requested: string | null): Pick<RunOptions, 'cwd' | 'writable'> {
    const { options } = this.policy.exec
    let base: string
    let writable = options.writable ?? []
    if (options.cwd !== undefined) base = path.resolve(options.cwd)
    else {
      this.workspace ??= makeWorkspace()
      base = this.workspace.dir
      writable = [base, ...writable]
    }
    if (requested === null) return { cwd: base, writable }
    if (requested.includes('\0') || path.isAbsolute(requested))
      throw new Error(`working_directory must be a directory relative to the execs' own (${requested})`)
    const inside = path.resolve(base, requested)
    let real: string
    try {
      real = realpathSync(inside)
      if (!statSync(real).isDirectory()) throw new Error('not a directory')
    } catch {
      throw new Error(`working_directory ${requested} is not a directory`)
    }
    const realBase = realpathSync(base)
    if (real !== realBase && !real.startsWith(realBase + path.sep))
      throw new Error(`working_directory ${requested} is outside the execs' own directory`)
    return { cwd: real, writable }
  }

  log(level: number, bytes: Uint8Array, length: number): void {
    // Invalid UTF-8 becomes U+FFFD, as the seed's from_utf8_lossy; a level outside 0-4 is info, as there.
    const msg = new TextDecoder('utf-8').decode(bytes)
    const entry: LogEntry = { level: LEVELS[level] ?? 'info', msg, source: 'wasm' }
    // Cut to MAX_LOG_LINE on the guest's side: the length it gave is kept.
    if (length > bytes.length) entry.length = length
    this.keepLog(entry, bytes.length)
  }

  note(message: string): void {
    this.keepLog({ level: 'warn', msg: message, source: 'cordon' }, Buffer.byteLength(message))
  }

  /** Each line costs its bytes and one more (its newline, as on cordon's log channel): empty ones too. */
  private keepLog(entry: LogEntry, bytes: number): void {
    if (this.logsTruncated || this.logBytes + bytes + 1 > this.policy.limits.maxLogBytes) {
      this.logsTruncated = true
      return
    }
    this.logBytes += bytes + 1
    this.logs.push(entry)
    this.policy.onLog?.(entry)
  }

  write(fd: 1 | 2, bytes: Uint8Array): void {
    const stream = fd === 1 ? 'stdout' : 'stderr'
    if (this.truncated) return
    const room = this.policy.limits.maxOutputBytes - this.outputBytes
    const kept = Buffer.from(bytes.subarray(0, Math.max(0, room)))
    this.kept[stream].push(kept)
    this.outputBytes += kept.length
    if (this.policy.onOutput && kept.length > 0) {
      const data = this.live[stream].write(kept)
      if (data) this.policy.onOutput({ stream, data, bytes: kept.length } satisfies OutputChunk)
    }
    if (bytes.length > room) {
      this.truncated = true
      const limit = this.policy.limits.maxOutputBytes
      this.stop({ kind: 'output-limit', limit, message: `the guest's output exceeded ${limit} bytes` })
    }
  }

  output(): { stdout: string; stderr: string } {
    const text = (chunks: Buffer[]) => new TextDecoder('utf-8').decode(Buffer.concat(chunks))
    return { stdout: text(this.kept.stdout), stderr: text(this.kept.stderr) }
  }

  /** Stops the exec in flight (status canceled) and waits for it; removes the workspace. Never rejects. */
  async close(): Promise<void> {
    this.abort.abort()
    await this.inFlight
    if (this.workspace) await removeWrittenTree(this.workspace.root, { anyOwner: process.getuid?.() === 0 })
  }
}

/**
 * A fresh directory for the execs: the cwd of each and the one they may write. As root the sandboxes get a
 * pool uid unknown until each launch, so it is 0777, inside a 0711 directory of cordon's own (no listing).
 */
function makeWorkspace(): { root: string; dir: string } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cordon-wasm-'))
  chmodSync(root, 0o711)
  const dir = path.join(root, 'work')
  mkdirSync(dir)
  chmodSync(dir, 0o777)
  return { root, dir }
}

/** A call as the guest's side must send it: anything else is a breach. */
function parseCall(raw: unknown): { name: string; values: (number | bigint)[]; bytes?: Uint8Array } | null {
  if (typeof raw !== 'object' || raw === null) return null
  const { name, values, bytes } = raw as Record<string, unknown>
  if (typeof name !== 'string' || name.length > MAX_NAME) return null
  if (!Array.isArray(values) || values.length > MAX_VALUES) return null
  if (!values.every((v) => typeof v === 'bigint' || (typeof v === 'number' && Number.isSafeInteger(v))))
    return null
  if (bytes !== undefined && (!(bytes instanceof Uint8Array) || bytes.length > MAX_CALL_BYTES)) return null
  return bytes === undefined ? { name, values } : { name, values, bytes }
}

function describe(raw: unknown): string {
  const name = typeof raw === 'object' && raw !== null ? (raw as { name?: unknown }).name : undefined
  return typeof name === 'string' ? name.slice(0, MAX_NAME) : typeof raw
}
