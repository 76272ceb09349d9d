// bincode 1.3 as `bincode::serialize`/`deserialize` spell it (the seed's codec): fixed-width little-endian
// integers, u64 lengths, a u8 tag for Option, a u32 tag for enum variants, strings as strict UTF-8, and
// trailing bytes after a value accepted. Only the seed's own types are spelled here. Every length is
// judged against the bytes that are left before anything is read or made, so hostile input costs at
// most one pass over itself. test/wasm/vectors/ holds what Rust's bincode 1.3.3 made of the same values.

/** The seed's `SandboxExecRequest` (platform-v2 PR #33): `env` is a HashMap there, pairs in wire order here. */
export interface SandboxExecRequest {
  command: string
  args: string[]
  env: [string, string][]
  stdin: Uint8Array | null
  workingDirectory: string | null
}

export interface SandboxExecResponse {
  exitCode: number
  stdout: Uint8Array
  stderr: Uint8Array
  durationMs: bigint
}

/** The seed's `SandboxError`, its variants in their wire order. */
export type SandboxError =
  | { kind: 'SandboxDisabled' }
  | { kind: 'CommandNotAllowed'; message: string }
  | { kind: 'Timeout'; value: bigint }
  | { kind: 'OutputTooLarge'; value: bigint }
  | { kind: 'ExecutionFailed'; message: string }
  | { kind: 'PolicyViolation'; message: string }

/** `Result<SandboxExecResponse, SandboxError>`, what `sandbox_exec` writes back. */
export type SandboxExecResult = { ok: SandboxExecResponse } | { err: SandboxError }

const ERROR_KINDS = [
  'SandboxDisabled',
  'CommandNotAllowed',
  'Timeout',
  'OutputTooLarge',
  'ExecutionFailed',
  'PolicyViolation',
] as const

export class BincodeError extends Error {
  override readonly name = 'BincodeError'
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const U64_MAX = (1n << 64n) - 1n

/** Reads one value after another from `bytes`; throws BincodeError at the first thing bincode refuses. */
export class Reader {
  private at = 0
  private readonly view: DataView

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }

  get remaining(): number {
    return this.bytes.length - this.at
  }

  private need(n: number, what: string): number {
    if (n > this.remaining) throw new BincodeError(`unexpected end of input reading ${what}`)
    const start = this.at
    this.at += n
    return start
  }

  u8(what = 'u8'): number {
    return this.view.getUint8(this.need(1, what))
  }

  i32(what = 'i32'): number {
    return this.view.getInt32(this.need(4, what), true)
  }

  u32(what = 'u32'): number {
    return this.view.getUint32(this.need(4, what), true)
  }

  u64(what = 'u64'): bigint {
    return this.view.getBigUint64(this.need(8, what), true)
  }

  /** A length: a u64 that must fit in what is left (each item takes at least `itemBytes`). */
  length(what: string, itemBytes = 1): number {
    const n = this.u64(`the length of ${what}`)
    if (n > BigInt(Math.floor(this.remaining / itemBytes)))
      throw new BincodeError(`unexpected end of input: ${what} claims ${n} items`)
    return Number(n)
  }

  bytesOf(what: string): Uint8Array {
    const n = this.length(what)
    const start = this.need(n, what)
    return this.bytes.slice(start, start + n)
  }

  string(what: string): string {
    const n = this.length(what)
    const start = this.need(n, what)
    try {
      return utf8.decode(this.bytes.subarray(start, start + n))
    } catch {
      throw new BincodeError(`invalid utf-8 in ${what}`)
    }
  }

  option<T>(what: string, read: () => T): T | null {
    const tag = this.u8(`the tag of ${what}`)
    if (tag === 0) return null
    if (tag === 1) return read()
    throw new BincodeError(`invalid Option tag ${tag} for ${what}`)
  }
}

/** Appends values; grows as it goes. */
export class Writer {
  private buf = new Uint8Array(64)
  private view = new DataView(this.buf.buffer)
  private at = 0

  private room(n: number): number {
    if (this.at + n > this.buf.length) {
      const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n))
      next.set(this.buf.subarray(0, this.at))
      this.buf = next
      this.view = new DataView(next.buffer)
    }
    const start = this.at
    this.at += n
    return start
  }

  // room() first: it may replace the buffer and its view.
  u8(v: number): this {
    const at = this.room(1)
    this.view.setUint8(at, v)
    return this
  }

  i32(v: number): this {
    const at = this.room(4)
    this.view.setInt32(at, v, true)
    return this
  }

  u32(v: number): this {
    const at = this.room(4)
    this.view.setUint32(at, v, true)
    return this
  }

  u64(v: bigint | number): this {
    const n = BigInt(v)
    if (n < 0n || n > U64_MAX) throw new RangeError(`${n} is not a u64`)
    const at = this.room(8)
    this.view.setBigUint64(at, n, true)
    return this
  }

  bytes(v: Uint8Array): this {
    this.u64(v.length)
    const at = this.room(v.length)
    this.buf.set(v, at)
    return this
  }

  string(v: string): this {
    return this.bytes(new TextEncoder().encode(v))
  }

  option<T>(v: T | null, write: (v: T) => void): this {
    if (v === null) return this.u8(0)
    this.u8(1)
    write(v)
    return this
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.at)
  }
}

/** The request as the seed's `bincode::deserialize` reads it (trailing bytes allowed, as there). */
export function decodeRequest(bytes: Uint8Array): SandboxExecRequest {
  const r = new Reader(bytes)
  const command = r.string('command')
  const args: string[] = []
  for (let i = 0, n = r.length('args', 8); i < n; i++) args.push(r.string(`args[${i}]`))
  const env: [string, string][] = []
  for (let i = 0, n = r.length('env', 16); i < n; i++)
    env.push([r.string('an env key'), r.string('an env value')])
  const stdin = r.option('stdin', () => r.bytesOf('stdin'))
  const workingDirectory = r.option('working_directory', () => r.string('working_directory'))
  return { command, args, env, stdin, workingDirectory }
}

export function encodeRequest(req: SandboxExecRequest): Uint8Array {
  const w = new Writer().string(req.command).u64(req.args.length)
  for (const a of req.args) w.string(a)
  w.u64(req.env.length)
  for (const [k, v] of req.env) w.string(k).string(v)
  w.option(req.stdin, (s) => w.bytes(s))
  w.option(req.workingDirectory, (d) => w.string(d))
  return w.finish()
}

export function encodeResult(result: SandboxExecResult): Uint8Array {
  const w = new Writer()
  if ('ok' in result) {
    const o = result.ok
    return w.u32(0).i32(o.exitCode).bytes(o.stdout).bytes(o.stderr).u64(o.durationMs).finish()
  }
  const e = result.err
  w.u32(1).u32(ERROR_KINDS.indexOf(e.kind))
  if ('message' in e) w.string(e.message)
  else if ('value' in e) w.u64(e.value)
  return w.finish()
}

/** What a guest reads back (tests, and guests written in TypeScript's terms). */
export function decodeResult(bytes: Uint8Array): SandboxExecResult {
  const r = new Reader(bytes)
  const tag = r.u32('the Result tag')
  if (tag === 0) {
    const exitCode = r.i32('exit_code')
    const stdout = r.bytesOf('stdout')
    const stderr = r.bytesOf('stderr')
    return { ok: { exitCode, stdout, stderr, durationMs: r.u64('duration_ms') } }
  }
  if (tag !== 1) throw new BincodeError(`invalid Result tag ${tag}`)
  const variant = r.u32('the SandboxError tag')
  const kind = ERROR_KINDS[variant]
  switch (kind) {
    case 'SandboxDisabled':
      return { err: { kind } }
    case 'Timeout':
    case 'OutputTooLarge':
      return { err: { kind, value: r.u64(kind) } }
    case 'CommandNotAllowed':
    case 'ExecutionFailed':
    case 'PolicyViolation':
      return { err: { kind, message: r.string(kind) } }
    default:
      throw new BincodeError(`invalid SandboxError tag ${variant}`)
  }
}
