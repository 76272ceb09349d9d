// One run, from queued-and-started to its stored result: a fresh workspace (bounded: workspace.ts) with
// the request's files, the library's start() with the key's secrets injected and redacted, each output
// chunk and log line an event, the collected files kept (collect.ts), the workspace removed. Whatever goes wrong ends as the run's result (status
// `error`), never as an exception: a face promises a result.
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  writeSync,
} from 'node:fs'

import path from 'node:path'
import type { PassThrough } from 'node:stream'
import { StringDecoder } from 'node:string_decoder'
import {
  errorResult,
  formatBytes,
  PolicyError,
  type RunHandle,
  type RunOptions,
  type RunResult,
  redactorFor,
  type Spawner,
  start,
} from '../index.js'
import { collect } from './collect.js'
import type { HostOptions, RunRequest } from './request.js'
import type { KeyRecord, RunEvent, RunEventType } from './types.js'
import type { Workspace, Workspaces } from './workspace.js'

export interface WorkerContext {
  dataDir: string
  runId: string
  request: RunRequest
  key: KeyRecord
  spawner: Spawner | undefined
  signal: AbortSignal
  /** The run's stdin when the request said `'open'`: the service writes and ends it. */
  stdin: PassThrough | undefined
  /** Stores the run's next event and tells its followers. */
  emit: (type: RunEventType, data: Record<string, unknown>) => RunEvent
  /** Bytes of collected files kept per run at most. */
  maxCollectBytes: number
  /** Where the run's workspace comes from, bounded in size. */
  workspaces: Workspaces
  /** The operator's host paths and host state (ServiceOptions.hostOptions), in every run. */
  host?: HostOptions
  /** Told each event the store could not take (the run is then stopped). */
  onStoreError?: (error: Error) => void
  /** Warm members paired with workspaces (`--warm`, warm.ts), where a run may find one. */
  warm?: WarmSlots
}

/** Where a run may find a warm member with its workspace (warm.ts); null: the run takes the cold path. */
export interface WarmSlots {
  take(request: RunRequest): WarmLease | null
}

/** A member's workspace, now the run's (its release also ends the member), and the run's start in it. */
export interface WarmLease {
  readonly workspace: Workspace
  start(cmd: readonly string[], options: RunOptions<Buffer>): WarmRun
}

/** A run started through a lease: in its member (`warm`), or cold in the member's workspace. */
export interface WarmRun {
  handle: RunHandle<Buffer>
  warm: boolean
}

/** Where a run's collected files live. */
export const filesDir = (dataDir: string, runId: string) => path.join(dataDir, 'files', runId)

/**
 * Runs one run to its result (which the caller stores with finishRun). Never throws. Its workspace goes
 * only once its sandbox is gone (runIn returns only then), so nothing of the sandbox can swap a directory
 * for a link while root walks it; were that ever unsure, it goes without a walk (workspace.ts).
 */
export async function executeRun(ctx: WorkerContext): Promise<RunResult> {
  const events = new EventSink(ctx.emit, ctx.onStoreError)
  // A warm member comes with the workspace it was made in; otherwise a fresh one.
  const lease = ctx.warm?.take(ctx.request) ?? null
  let workspace: Workspace
  try {
    workspace = lease?.workspace ?? (await ctx.workspaces.acquire(ctx.runId))
  } catch (error) {
    return errorResult('files', `could not prepare the workspace: ${(error as Error).message}`)
  }
  let sandboxGone = true
  try {
    try {
      writeFiles(workspace.dir, ctx.request.files)
    } catch (error) {
      return errorResult('files', `could not prepare the workspace: ${(error as Error).message}`)
    }
    sandboxGone = false
    const result = await runIn(ctx, workspace, events, lease)
    sandboxGone = true
    for (const event of result.network) events.emit('network', { ...event })
    if (events.failure) return events.result(result)
    try {
      // Redacted exactly as the output was: the library's redaction of the run's own options.
      await collect(
        workspace.dir,
        filesDir(ctx.dataDir, ctx.runId),
        ctx.request.collect,
        ctx.maxCollectBytes,
        {
          redactor: redactorFor(secretsOf(ctx)),
        },
      )
    } catch {
      // A file that could not be kept is not the run's failure: it is simply not there to read.
    }
    return result
  } catch (error) {
    return errorResult('worker', (error as Error).message)
  } finally {
    await workspace.release(sandboxGone)
  }
}

/**
 * A run's events on their way to the store. The first one the store refuses (its disk full, an I/O error)
 * stops the run (`onFail`: its sandbox is killed), and no more are written: the run ends `error`, naming
 * the store's failure, rather than run on unsupervised with nothing kept of it. Never throws: emit() is
 * called from output handlers and timers, where a throw would take the server down.
 */
export class EventSink {
  failure: Error | null = null
  /** Stops the run: set once its sandbox exists. */
  onFail: () => void = () => {}

  constructor(
    private readonly store: WorkerContext['emit'],
    private readonly onStoreError: ((error: Error) => void) | undefined,
  ) {}

  emit(type: RunEventType, data: Record<string, unknown>): void {
    if (this.failure) return
    try {
      this.store(type, data)
    } catch (error) {
      this.failure = error instanceof Error ? error : new Error(String(error))
      try {
        this.onStoreError?.(this.failure)
      } catch {
        // a logger's failure is its own
      }
      this.onFail()
    }
  }

  /** The run's result once an event could not be stored: small, so a store short of room may take it. */
  result(ran: RunResult): RunResult {
    const failure = this.failure as Error & { code?: unknown }
    const why = typeof failure.code === 'string' ? `${failure.code}: ${failure.message}` : failure.message
    return errorResult('store', `the run's events could not be stored (${why}): it was stopped`, {
      isolation: ran.isolation,
    })
  }
}

/**
 * Log lines sent as events, at most, per run. Each is a stored row (~100 bytes more than the line): a
 * program writing 256 KiB of tiny lines (its maxLogBytes) made 131 000 rows and 30 MB of database. The
 * result keeps them all, within maxLogBytes.
 */
export const MAX_LOG_EVENTS = 1000

/** How long, and how many bytes, output is gathered into one event at most. */
const OUTPUT_FLUSH_MS = 25
const OUTPUT_FLUSH_BYTES = 64 * 1024
/** Switches of stream a window keeps exact (each ends an event); past them, the streams gather apart. */
const OUTPUT_SWITCHES = 4

/**
 * Where the data dir stands for a run. It holds every key's secrets (cordon.db) and the other runs'
 * workspaces. As root it is root's 0700, which the sandbox's pool uid cannot enter (its own workspace is
 * handed in by fd). Not as root the sandbox has the server's own uid, and only the namespace tier can keep
 * the data dir from it (hidden, but for the run's own workspace): such a server runs no other tier.
 */
export function dataDirGuard(
  isolation: RunRequest['options']['isolation'],
  dataDir: string,
  asRoot: boolean,
): { isolation?: 'namespace'; hide?: string[] } | { refused: string } {
  if (asRoot) return {}
  if (isolation === 'process') {
    return {
      refused:
        'the process tier cannot keep a server not running as root from its own sandboxes: run cordon serve as root, or use the namespace tier',
    }
  }
  return { isolation: 'namespace', hide: [dataDir] }
}

/**
 * Starts the run and streams its events; resolves (never rejects) only once its sandbox is gone: every
 * way out kills it first and waits for its result, which the library gives only when nothing of the
 * sandbox runs any more.
 */
async function runIn(
  ctx: WorkerContext,
  workspace: Workspace,
  events: EventSink,
  lease: WarmLease | null,
): Promise<RunResult> {
  const { request } = ctx
  const guard = dataDirGuard(request.options.isolation, ctx.dataDir, process.getuid?.() === 0)
  if ('refused' in guard) return errorResult('options.isolation', guard.refused)
  // Bytes: the events and /output keep the program's output exactly (redacted as bytes); the result's
  // text is decoded from them below, as the library's text mode would have.
  let logEvents = 0
  const options: RunOptions<Buffer> = {
    ...request.options,
    ...guard,
    ...secretsOf(ctx),
    ...hostPaths(ctx.host ?? {}, workspace.dir, guard.hide),
    signal: ctx.signal,
    stdin: stdinOf(request, ctx.stdin),
    encoding: 'buffer',
    onLog: (entry) => {
      logEvents++
      if (logEvents <= MAX_LOG_EVENTS) events.emit('log', { ...entry })
      else if (logEvents === MAX_LOG_EVENTS + 1)
        events.emit('log', {
          level: 'warn',
          msg: `cordon: ${MAX_LOG_EVENTS} log lines were sent as events; the rest are in the result (logs)`,
          source: 'cordon',
        })
    },
  }
  if (ctx.spawner) options.spawner = ctx.spawner
  let handle: RunHandle<Buffer>
  let warm = false
  try {
    if (lease) ({ handle, warm } = lease.start(request.cmd, options))
    else handle = start(request.cmd, options)
  } catch (error) {
    if (error instanceof PolicyError) return errorResult(`options.${error.field}`, error.message)
    return errorResult('start', (error as Error).message)
  }
  events.onFail = () => handle.kill()
  // A workspace the kernel cannot bound (not as root) is measured as the run runs: past its quota the
  // run is stopped, as a limit it hit.
  let over: string | null = null
  const unwatch = workspace.watch((why) => {
    over = why
    handle.kill()
  })
  // Output events carry the kept, redacted bytes exactly, base64; `offset` counts them per stream, so the
  // events put together are exactly the output, and /output serves it from them.
  // Chunks are gathered for up to OUTPUT_FLUSH_MS (or OUTPUT_FLUSH_BYTES): the program decides how its
  // writes are split, and one stored event per one-byte write made ~150 bytes of database per byte.
  // A switch of stream ends the event being gathered, so the events keep the interleaving of stdout and
  // stderr; but only OUTPUT_SWITCHES times a window: past that, each stream is gathered on its own until
  // the window ends (a program alternating one-byte writes made an event per byte).
  const offsets = { stdout: 0, stderr: 0 }
  const text = new TextOfChunks()
  /** What is gathered, per stream, in the order the streams began writing it. */
  let pending: { stream: 'stdout' | 'stderr'; parts: Buffer[]; bytes: number }[] = []
  let switches = 0
  // The first chunk after a quiet spell goes out at once (a live reader sees it within milliseconds);
  // what follows it within OUTPUT_FLUSH_MS is gathered into the next event, so the bound holds.
  let gathering: NodeJS.Timeout | undefined
  const flush = () => {
    for (const { stream, parts } of pending) {
      const bytes = Buffer.concat(parts)
      events.emit('output', {
        stream,
        offset: offsets[stream],
        bytes: bytes.length,
        data: bytes.toString('base64'),
      })
      offsets[stream] += bytes.length
    }
    pending = []
  }
  const openWindow = () => {
    switches = 0
    gathering = setTimeout(() => {
      gathering = undefined
      if (pending.length === 0) return
      flush()
      openWindow()
    }, OUTPUT_FLUSH_MS)
  }
  try {
    events.emit('started', { pid: handle.pid ?? null, warm })
    for await (const chunk of handle.output) {
      const bytes = chunk.data
      text.push(chunk.stream, bytes.length)
      const last = pending.at(-1)
      if (last && last.stream !== chunk.stream && switches < OUTPUT_SWITCHES) {
        flush()
        switches++
      }
      let gathered = pending.find((p) => p.stream === chunk.stream)
      if (!gathered) {
        gathered = { stream: chunk.stream, parts: [], bytes: 0 }
        pending.push(gathered)
      }
      gathered.parts.push(bytes)
      gathered.bytes += bytes.length
      if (gathering === undefined) {
        flush()
        openWindow()
      } else if (gathered.bytes >= OUTPUT_FLUSH_BYTES) flush()
    }
    clearTimeout(gathering)
    flush()
    const result = text.result(await handle.result)
    return over === null ? result : workspaceOver(result, over, ctx.workspaces.maxBytes)
  } catch (error) {
    return errorResult('worker', (error as Error).message)
  } finally {
    unwatch()
    clearTimeout(gathering)
    // Once the run has ended, kill() does nothing; before, it stops the sandbox, and its result says when
    // nothing of it is left.
    handle.kill()
    await handle.result.catch(() => undefined)
  }
}

/** The result of a run stopped because its measured workspace grew past its quota: a limit it hit. */
function workspaceOver(result: RunResult, why: string, quota: number): RunResult {
  const message = `the workspace grew past ${formatBytes(quota)} (${why}): the run was stopped`
  return { ...result, status: 'file-size', violation: { kind: 'file-size', limit: quota, message } }
}

/**
 * What a run's options say of its secrets: the request's `env` with the key's secrets injected (a request
 * cannot override them), its `redact` with their values, and the operator's `passEnv`. The run redacts
 * its output by these, and its collected files by the same.
 */
export function secretsOf(
  ctx: Pick<WorkerContext, 'request' | 'key' | 'host'>,
): Pick<RunOptions, 'env' | 'redact' | 'passEnv'> {
  const secretValues = Object.values(ctx.key.secrets).filter((v) => v.length > 0)
  const passEnv = ctx.host?.passEnv
  return {
    env: { ...(ctx.request.options.env ?? {}), ...ctx.key.secrets },
    redact: [...(ctx.request.options.redact ?? []), ...secretValues],
    ...(passEnv && passEnv.length > 0 ? { passEnv } : {}),
  }
}

/**
 * A result of `encoding: 'buffer'` as the library's text mode gives it: each stream decoded as UTF-8 (a
 * character cut across reads comes out whole, an invalid byte as U+FFFD), and `output` as text mode builds
 * it, each stream's text appended as its bytes arrive, then what each stream's decoder held at the end.
 * Only where the streams take turns is kept during the run (not a copy of the text): the kept bytes in
 * arrival order are the result's `output`, cut there at the end.
 */
export class TextOfChunks {
  /**
   * Bytes of each turn, the streams alternating from `first`: a number a turn (a program switching
   * streams at every write makes a turn per read, up to the output cap; a pair each was ~74 bytes).
   */
  private readonly turns: number[] = []
  private first: 'stdout' | 'stderr' = 'stdout'
  private last: 'stdout' | 'stderr' | null = null

  /** `bytes` of `stream` arrived (a live chunk, in order). */
  push(stream: 'stdout' | 'stderr', bytes: number): void {
    if (bytes === 0) return
    if (this.last === stream) {
      this.turns[this.turns.length - 1] = (this.turns.at(-1) as number) + bytes
      return
    }
    if (this.last === null) this.first = stream
    this.last = stream
    this.turns.push(bytes)
  }

  result(result: RunResult<Buffer>): RunResult {
    const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') }
    let output = ''
    let at = 0
    let stream = this.first
    for (const bytes of this.turns) {
      output += decoders[stream].write(result.output.subarray(at, at + bytes))
      at += bytes
      stream = stream === 'stdout' ? 'stderr' : 'stdout'
    }
    // The chunks are the kept bytes, in order; were they not, the streams' texts one after the other.
    if (at !== result.output.length) output = result.stdout.toString('utf8') + result.stderr.toString('utf8')
    else output += decoders.stdout.end() + decoders.stderr.end()
    return {
      ...result,
      stdout: result.stdout.toString('utf8'),
      stderr: result.stderr.toString('utf8'),
      output,
    }
  }
}

/**
 * Where a run stands on the host: the fresh workspace as its cwd and one writable path, or, when the
 * operator set a cwd, that directory (writable only where the operator's `writable` says, as for `cordon
 * run`). The operator's readable, hide, passEnv and root filesystem are added; the data dir stays hidden
 * (the guard).
 */
export function hostPaths(
  host: HostOptions,
  workspace: string,
  guardHide: string[] | undefined,
): Pick<RunOptions, 'cwd' | 'writable' | 'readable' | 'hide' | 'passEnv' | 'rootfs'> {
  const out: Pick<RunOptions, 'cwd' | 'writable' | 'readable' | 'hide' | 'passEnv' | 'rootfs'> =
    host.cwd === undefined
      ? { cwd: workspace, writable: [workspace, ...(host.writable ?? [])] }
      : { cwd: host.cwd, writable: host.writable ?? [] }
  if (host.readable) out.readable = host.cwd === undefined ? [workspace, ...host.readable] : host.readable
  const hide = [...(host.hide ?? []), ...(guardHide ?? [])]
  if (hide.length > 0 || host.hide) out.hide = hide
  if (host.passEnv && host.passEnv.length > 0) out.passEnv = host.passEnv
  if (host.rootfs !== undefined) out.rootfs = host.rootfs
  return out
}

function stdinOf(request: RunRequest, open: PassThrough | undefined): RunOptions['stdin'] {
  if (request.stdin === 'open') return open
  if (request.stdin === undefined) return '' // start() would otherwise keep it open
  if (typeof request.stdin === 'string') return request.stdin
  return Buffer.from(request.stdin.base64, 'base64')
}

/** Writes the request's files, never through a symlink, never outside the workspace. */
export function writeFiles(workspace: string, files: RunRequest['files']): void {
  for (const file of files) {
    const parts = file.path.split('/').filter((p) => p !== '' && p !== '.')
    if (parts.length === 0 || parts.includes('..'))
      throw new Error(`${file.path}: not a path in the workspace`)
    let dir = workspace
    for (const part of parts.slice(0, -1)) {
      dir = path.join(dir, part)
      try {
        mkdirSync(dir, { mode: 0o777 })
        chmodSync(dir, 0o777)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      }
      if (!lstatSync(dir).isDirectory()) throw new Error(`${file.path}: ${part} is not a directory`)
    }
    const target = path.join(dir, parts.at(-1) as string)
    const fd = openSync(
      target,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
      file.mode ?? 0o666,
    )
    try {
      if (!fstatSync(fd).isFile()) throw new Error(`${file.path}: not a regular file`)
      writeSync(fd, Buffer.from(file.content, file.encoding))
    } finally {
      closeSync(fd)
    }
    // The umask would take the sandbox's write bit away: a run's files are its own.
    chmodSync(target, file.mode ?? 0o666)
  }
}
