// A spawner: a small helper process that starts the sandboxes of one host, so that the host is not forked
// for each (see native/spawner.c for why, and for the protocol). Opt-in and owned by whoever opens it:
// no helper exists until `openSpawner()`, and each one is its own (no process-wide state).
import { type ChildProcess, spawn } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { closeSync, existsSync, openSync, readSync, writeSync } from 'node:fs'
import { Socket } from 'node:net'
import { constants } from 'node:os'
import { getSystemErrorName } from 'node:util'
import { CordonError } from '../errors.js'
import { SPAWNER_PATH } from '../host/native.js'
import { nodeSignalName } from '../host/signals.js'

/** The longest request the spawner reads (native/spawner.c): more than exec ever takes (6 MiB). */
const MAX_REQUEST = 8 * 2 ** 20

/**
 * Per child fd: nothing, /dev/null, a pipe the host reads (the child writes), a pipe the host writes, or
 * (a number) that fd of the host's: the spawner reopens it through /proc/<host>/fd with O_PATH, which follows
 * the fd's own file, never a lookup of its name; meant for the host's O_PATH fds (judged paths). Pipes go to
 * the first MAX_PIPE_FDS fds, host fds to any below MAX_FDS.
 */
export type SpawnStdio = 'none' | 'null' | 'read' | 'write' | number
const STDIO_CODE: Record<Exclude<SpawnStdio, number>, string> = {
  none: '-',
  null: 'n',
  read: 'r',
  write: 'w',
}
/** native/spawner.c's MAX_STDIO and MAX_FDS. */
const MAX_PIPE_FDS = 16
const MAX_FDS = 1024

export interface SpawnRequest {
  file: string
  args: readonly string[]
  cwd: string
  env: Readonly<Record<string, string>>
  /** Own session and process group (setsid). */
  detached: boolean
  /** From fd 0 up; fds 0–2 must not be 'none'. */
  stdio: readonly SpawnStdio[]
}

/**
 * One process the spawner started, with the part of ChildProcess's interface cordon's supervisor uses:
 * 'exit' (code, signal), then 'close' once the pipes it reads are closed too; 'error' when it could not be
 * started (or the spawner died under it). An exit by a signal Node has no name for reads as 128+N.
 */
export class SpawnedProcess extends EventEmitter {
  exitCode: number | null = null
  signalCode: NodeJS.Signals | null = null
  readonly stdin: Socket | null
  readonly stdout: Socket | null
  readonly stderr: Socket | null
  private exited = false
  /** It never ran (its exec failed): like Node, no 'exit', and 'close' without a code. */
  private notStarted = false
  private openReads: number

  constructor(
    readonly pid: number | undefined,
    readonly stdio: readonly (Socket | null)[],
    private readonly send: (signal: number) => void,
  ) {
    super()
    ;[this.stdin = null, this.stdout = null, this.stderr = null] = stdio
    const reads = stdio.filter((s): s is Socket => s?.readable === true)
    this.openReads = reads.length
    for (const s of reads) s.once('close', () => --this.openReads === 0 && this.maybeClose())
  }

  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    if (this.exited) return false
    const n = typeof signal === 'number' ? signal : constants.signals[signal]
    if (n === undefined) throw new TypeError(`unknown signal: ${String(signal)}`)
    try {
      this.send(n)
      return true
    } catch {
      return false // the spawner is gone, and with it the process
    }
  }

  /** A process that could not be started: 'error', then 'close', as a ChildProcess does. */
  static couldNotStart(error: Error): SpawnedProcess {
    const child = new SpawnedProcess(undefined, [], () => {})
    child.exited = true
    child.notStarted = true
    process.nextTick(() => {
      child.emit('error', error)
      child.emit('close', null, null)
    })
    return child
  }

  /** From the spawner: the process ended (code -1: by signal `signo`). */
  ended(code: number, signo: number): void {
    if (this.exited) return
    this.exited = true
    // Like Node: what the host writes is of no use once the process is gone.
    for (const s of this.stdio) if (s?.writable && !s.readable) s.destroy()
    if (!this.notStarted) {
      const name = signo === 0 ? null : nodeSignalName(signo)
      this.exitCode = signo === 0 ? code : name === null ? 128 + signo : null
      this.signalCode = name
      this.emit('exit', this.exitCode, this.signalCode)
    }
    this.maybeClose()
  }

  /** From the spawner: its exec failed (`started`: false) or the spawner died under it. */
  failed(error: Error, started: boolean): void {
    this.notStarted ||= !started
    this.emit('error', error)
  }

  private maybeClose(): void {
    if (this.exited && this.openReads === 0) this.emit('close', this.exitCode, this.signalCode)
  }
}

/** A spawner could not start, or a request to it failed; `code` is the errno's name when there is one. */
export class SpawnerError extends CordonError {
  override readonly name = 'SpawnerError'
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message)
  }
}

/**
 * An open spawner: pass it as `spawner` in run options; `close()` it (or `await using`) when done. What it
 * starts for cordon's runs (`spawn`) is internal: the public type (dist/*.d.ts, built with stripInternal)
 * has no way to start an unsandboxed process.
 */
export class Spawner {
  private readonly running = new Map<string, SpawnedProcess>()
  /** Started ahead of any run (a warm member): it keeps nothing alive, and close() ends it. */
  private readonly standby = new Map<SpawnedProcess, string>()
  private nextId = 1
  private closing: Promise<void> | null = null
  private idle: (() => void) | null = null
  private readonly exited: Promise<void>
  private gone = false
  /** The request and reply fds, until the spawner is closed or gone. */
  private fdsOpen = true
  private readonly uid = process.getuid?.()

  private constructor(
    private readonly helper: ChildProcess,
    private readonly requests: number,
    private readonly replies: number,
    private readonly stderr: { tail: string },
  ) {
    this.exited = new Promise((resolve) => helper.once('close', () => resolve()))
    // 'close', not 'exit': the events it wrote before it died are read first.
    helper.once('close', () => this.lost())
    this.unref()
  }

  /**
   * Start a spawner for this process. `background`: nobody waits for it (the default spawner), so it does
   * not keep the host alive even while it opens. @internal openSpawner() is the public way.
   */
  static async open(path = SPAWNER_PATH, background = false): Promise<Spawner> {
    if (!existsSync(path)) {
      throw new SpawnerError(
        `the spawner is not built (${path}): apt-get install -y gcc musl-tools; npm run build`,
      )
    }
    // Its own session: Ctrl-C at the host's terminal is the host's to handle, not a kill of every run. No
    // environment: it gives each process the one it is asked to, and needs none of the host's itself.
    const helper = spawn(path, [String(process.pid)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: {},
    })
    if (background) {
      helper.unref()
      for (const pipe of [helper.stdout, helper.stderr]) (pipe as Socket).unref()
    }
    // What it says on stderr before dying goes into the errors that report its death.
    const stderr = { tail: '' }
    helper.stderr!.setEncoding('utf8').on('data', (s: string) => {
      stderr.tail = (stderr.tail + s).slice(-2000)
    })
    const opened: number[] = []
    try {
      const ready = await new Promise<string>((resolve, reject) => {
        let text = ''
        const onData = (chunk: Buffer) => {
          text += chunk.toString('latin1')
          const end = text.indexOf('\n')
          if (end < 0) return
          helper.stdout!.off('data', onData)
          helper.stdout!.pause()
          if (text.length > end + 1) helper.stdout!.unshift(Buffer.from(text.slice(end + 1), 'latin1'))
          resolve(text.slice(0, end))
        }
        helper.stdout!.on('data', onData)
        helper.once('error', reject)
        helper.once('exit', (code, sig) =>
          reject(new SpawnerError(`the spawner exited at start (${sig ?? code}): ${stderr.tail.trim()}`)),
        )
      })
      const [word, req, rep] = ready.split(' ')
      if (word !== 'ready') throw new SpawnerError(`the spawner said "${ready}" instead of ready`)
      opened.push(openSync(`/proc/${helper.pid}/fd/${req}`, 'w'))
      opened.push(openSync(`/proc/${helper.pid}/fd/${rep}`, 'r'))
    } catch (error) {
      // It would wait for a hello that never comes, holding this process's event loop open.
      for (const fd of opened) closeSync(fd)
      helper.kill('SIGKILL')
      throw error
    }
    const spawner = new Spawner(helper, opened[0]!, opened[1]!, stderr)
    spawner.request(['hello'])
    spawner.listen()
    return spawner
  }

  /** The spawner's own pid. */
  get pid(): number {
    return this.helper.pid!
  }

  /**
   * Start a process (synchronously, like child_process.spawn: the host waits for the spawner's fork, not
   * its own). Throws when the spawner is closed or gone. `standby`: a process made ahead of its run (a
   * warm member), which keeps neither the host nor the spawner's close() waiting until `activate()`.
   * @internal The run path's primitive: it sandboxes nothing, so it is not in the public type.
   */
  spawn(request: SpawnRequest, standby = false): SpawnedProcess {
    this.assertOpen()
    if (request.stdio.length < 3 || request.stdio.slice(0, 3).includes('none')) {
      throw new TypeError('stdio: fds 0-2 must be given')
    }
    if (request.stdio.length > MAX_FDS) throw new TypeError(`stdio: at most ${MAX_FDS} fds`)
    const hostFds: number[] = []
    const codes: string[] = []
    for (const [fd, s] of request.stdio.entries()) {
      if (typeof s === 'number') {
        if (!Number.isInteger(s) || s < 0) throw new TypeError(`stdio[${fd}]: ${s} is not an fd`)
        hostFds.push(s)
        codes.push('h')
      } else {
        if ((s === 'read' || s === 'write') && fd >= MAX_PIPE_FDS)
          throw new TypeError(`stdio[${fd}]: pipes go to the first ${MAX_PIPE_FDS} fds`)
        codes.push(STDIO_CODE[s])
      }
    }
    const id = String(this.nextId++)
    const env = Object.entries(request.env).map(([k, v]) => `${k}=${v}`)
    const stdio = codes.join('')
    const answer = this.request([
      'spawn',
      id,
      request.file,
      request.cwd,
      request.detached ? '1' : '0',
      // The host's umask of the moment, as a fork of the host would have. Reading it writes it back at once
      // (why DEP0139 deprecates it, in docs only: a race with worker threads that change it); /proc costs 30 µs.
      process.umask().toString(8),
      stdio,
      hostFds.join(','),
      String(request.args.length + 1),
      request.file,
      ...request.args,
      String(env.length),
      ...env,
    ])
    const [word, ...rest] = answer.split(' ')
    if (word !== 'ok') {
      const code = getSystemErrorName(-Number(rest[0]))
      return SpawnedProcess.couldNotStart(
        new SpawnerError(`the spawner could not start ${request.file}: ${code}`, code),
      )
    }
    const [pid, ...ends] = rest.map(Number)
    const sockets: (Socket | null)[] = []
    try {
      for (const [fd, kind] of request.stdio.entries()) {
        if (kind !== 'read' && kind !== 'write') {
          sockets.push(null)
          continue
        }
        // A new open of the spawner's end of the pipe; the spawner closes its own once told.
        const own = openSync(`/proc/${this.pid}/fd/${ends[fd]}`, kind === 'read' ? 'r' : 'w')
        sockets.push(new Socket({ fd: own, readable: kind === 'read', writable: kind === 'write' }))
      }
      this.request(['opened', id])
    } catch (error) {
      // Out of fds, or the spawner died meanwhile: the process must not run on without its pipes.
      for (const s of sockets) s?.destroy()
      try {
        this.request(['kill', id, String(constants.signals.SIGKILL)])
        this.request(['opened', id])
      } catch {
        // The spawner is gone, and the process with it.
      }
      return SpawnedProcess.couldNotStart(
        new SpawnerError(`could not open the pipes: ${(error as Error).message}`),
      )
    }
    const child = new SpawnedProcess(pid!, sockets, (signal) => this.request(['kill', id, String(signal)]))
    this.running.set(id, child)
    if (standby) this.standby.set(child, id)
    else this.ref()
    return child
  }

  /** A standby process's run begins: from now on it is one of the runs (see spawn). @internal */
  activate(child: SpawnedProcess): void {
    if (this.standby.delete(child) && this.running.size > 0) this.ref()
  }

  /** Whether new processes can be started (assertOpen would not throw). @internal */
  get usable(): boolean {
    return !this.closing && !this.gone && process.getuid?.() === this.uid
  }

  /** Throws unless new processes can be started. @internal */
  assertOpen(): void {
    if (this.closing) throw new SpawnerError('the spawner is closed')
    if (this.gone) throw new SpawnerError('the spawner has exited')
    // The host opens the spawner's pipe ends through /proc, which needs the uid it had when it opened it.
    const uid = process.getuid?.()
    if (uid !== this.uid) {
      throw new SpawnerError(
        `the spawner was opened as uid ${this.uid}, this process is now uid ${uid}: open a new spawner after changing uid`,
      )
    }
  }

  /**
   * Stop taking new processes; resolves once those running have ended and the spawner has exited.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      // Standby processes were never runs: they end now, and are waited for like the rest.
      for (const id of this.standby.values()) {
        try {
          this.request(['kill', id, String(constants.signals.SIGKILL)])
        } catch {
          // The spawner is gone, and they with it.
        }
      }
      if (this.running.size > 0) await new Promise<void>((resolve) => (this.idle = resolve))
      this.closeFds()
      this.ref() // until it has exited: the caller awaits that
      await this.exited
    })()
    return this.closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /** Write one request; `spawn` also reads its reply, which the spawner writes before anything else. */
  private request(fields: readonly string[]): string {
    const body = Buffer.from(`${fields.join('\0')}\0`)
    // More than exec takes: refused here, without the spawner reading it all to refuse it too.
    if (body.length > MAX_REQUEST) return `err ${constants.errno.E2BIG}`
    // Closed once the spawner is gone: the numbers may name someone else's files by now.
    if (!this.fdsOpen) throw new SpawnerError('the spawner has exited')
    const frame = Buffer.allocUnsafe(4 + body.length)
    frame.writeUInt32LE(body.length, 0)
    body.copy(frame, 4)
    try {
      for (let at = 0; at < frame.length; ) at += writeSync(this.requests, frame, at)
    } catch (error) {
      throw new SpawnerError(`the spawner is gone: ${(error as Error).message} ${this.stderr.tail.trim()}`)
    }
    return fields[0] === 'spawn' ? this.readReply() : ''
  }

  private readReply(): string {
    const buf = Buffer.allocUnsafe(256)
    let text = ''
    while (!text.endsWith('\n')) {
      const n = readSync(this.replies, buf, 0, buf.length, null)
      if (n === 0) throw new SpawnerError(`the spawner exited: ${this.stderr.tail.trim()}`)
      text += buf.toString('latin1', 0, n)
    }
    return text.slice(0, -1)
  }

  private listen(): void {
    let text = ''
    const out = this.helper.stdout!
    out.setEncoding('latin1')
    out.on('data', (chunk: string) => {
      text += chunk
      for (let end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n')) {
        this.event(text.slice(0, end).split(' '))
        text = text.slice(end + 1)
      }
    })
    out.resume()
  }

  private event([word, id = '', a = '', b = '']: string[]): void {
    const child = this.running.get(id)
    if (!child) return
    if (word === 'fail') {
      const code = getSystemErrorName(-Number(a))
      child.failed(new SpawnerError(`could not start the process: ${code}`, code), false)
    }
    if (word !== 'exit') return
    this.running.delete(id)
    this.standby.delete(child)
    child.ended(Number(a), Number(b))
    this.settle()
  }

  /** The spawner exited: its processes die with it (parent-death signals); nothing more will be said of them. */
  private lost(): void {
    this.gone = true
    this.closeFds()
    for (const [id, child] of this.running) {
      this.running.delete(id)
      this.standby.delete(child)
      child.failed(new SpawnerError(`the spawner exited under the process: ${this.stderr.tail.trim()}`), true)
      child.ended(-1, constants.signals.SIGKILL)
    }
    this.settle()
  }

  /** The end of the request pipe is what tells the spawner to exit. */
  private closeFds(): void {
    if (!this.fdsOpen) return
    this.fdsOpen = false
    closeSync(this.requests)
    closeSync(this.replies)
  }

  /** With nothing running the spawner must not keep the host alive; with something, it must. */
  private settle(): void {
    if (this.running.size > this.standby.size) return
    this.unref()
    if (this.running.size === 0) this.idle?.()
  }

  private ref(): void {
    this.helper.ref()
    ;(this.helper.stdout as Socket).ref()
  }

  private unref(): void {
    this.helper.unref()
    ;(this.helper.stdout as Socket).unref()
    ;(this.helper.stderr as Socket).unref()
  }
}

/** Open a spawner: pass it as `spawner` in run options; `close()` it when done. */
export function openSpawner(): Promise<Spawner> {
  return Spawner.open()
}
