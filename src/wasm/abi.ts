// What the import sets share: their wasm signatures, the shape of a host call as it crosses from the guest's
// thread (or sandbox) to the host, and both sides of a call. Loaded in the worker too: types only from the
// engine, no zod.
import type { RunResult } from '../index.js'
import type { GuestClock } from './clock.js'

export type ValType = 'i32' | 'i64' | 'f32' | 'f64' | 'v128' | 'funcref' | 'externref'

export interface Signature {
  params: readonly ValType[]
  results: readonly ValType[]
}

export const sig = (params: string, results = ''): Signature => ({
  params: params ? (params.split(',') as ValType[]) : [],
  results: results ? (results.split(',') as ValType[]) : [],
})

export const showSignature = (s: Signature) => `(${s.params.join(',')})->(${s.results.join(',')})`

/**
 * One call of an import, as the host gets it: `name` is `module.field`, `values` the arguments the host needs
 * (numbers for i32, bigint for i64), `bytes` what the guest side read from the guest's memory for it.
 */
export interface HostCall {
  name: string
  values: (number | bigint)[]
  bytes?: Uint8Array
}

/** The host's answer: the values the guest side needs, and bytes to write into the guest's memory. */
export interface HostReply {
  values: (number | bigint)[]
  bytes?: Uint8Array
}

/** The guest's side of the imports: its memory as it is now, and a synchronous call to the host. */
export interface GuestEnv {
  /** The guest's memory at this moment (null before instantiation ends, or without a memory export). */
  memory(): Uint8Array | null
  call(call: HostCall): HostReply
  /** WASI proc_exit: unwinds the guest. */
  exit(code: number): never
}

/** The most bytes one host call carries either way: a request, a log line, a write. */
export const MAX_CALL_BYTES = 1024 * 1024

/** `[ptr, ptr+len)` lies in memory now; `ptr` and `len` as the guest passed them (i32, maybe negative). */
export function inBounds(memory: Uint8Array | null, ptr: number, len: number): memory is Uint8Array {
  return memory !== null && ptr >= 0 && len >= 0 && ptr + len <= memory.length
}

/** The bytes at `[ptr, ptr+len)` (a copy), or null when they are not all in memory. */
export function readGuest(memory: Uint8Array | null, ptr: number, len: number): Uint8Array | null {
  return inBounds(memory, ptr, len) ? memory.slice(ptr, ptr + len) : null
}

/** Writes `bytes` at `ptr` when they fit in memory now; false (nothing written) when they do not. */
export function writeGuest(memory: Uint8Array | null, ptr: number, bytes: Uint8Array): boolean {
  if (!inBounds(memory, ptr, bytes.length)) return false
  memory.set(bytes, ptr)
  return true
}

/** One command a guest asks for, in any import set's terms. */
export interface ExecRequest {
  argv: string[]
  env: [string, string][]
  stdin: Uint8Array | null
  /** Relative to the execs' working directory, which it must stay inside. */
  workingDirectory: string | null
}

/** What came of an exec: refused before run() (exec disabled, quota, invalid), or run()'s own result. */
export type ExecOutcome =
  | { kind: 'disabled' }
  | { kind: 'quota'; maxExecs: number }
  | { kind: 'invalid'; message: string }
  | { kind: 'ran'; result: RunResult<Buffer>; durationMs: number }

/** What the host side of an import set may do: the one session the guest runs in (host.ts). */
export interface HostContext {
  readonly clock: GuestClock
  /** `'error'`: an exec stopped at its output cap answers OutputTooLarge, not its truncated output. */
  readonly outputOverflow: 'truncate' | 'error'
  /** WASI's argv and environment (`NAME=value`). */
  readonly args: readonly string[]
  readonly environ: readonly string[]
  /** Whether exec is on, execs admitted so far, and how many more may be (null: exec is off). */
  execState(): { enabled: boolean; count: number; remaining: number | null }
  exec(request: ExecRequest): Promise<ExecOutcome>
  /** `level` as the guest gave it; `bytes` the line (maybe cut), `length` its length as given. */
  log(level: number, bytes: Uint8Array, length: number): void
  /** A line of cordon's own about the guest (a refused request): a `warn` entry, source `cordon`. */
  note(message: string): void
  /** WASI fd_write to 1 or 2. */
  write(fd: 1 | 2, bytes: Uint8Array): void
}

/** One import's host side: the values and bytes the guest side sent, to the values and bytes it needs. */
export type HostHandler = (
  values: (number | bigint)[],
  bytes: Uint8Array | undefined,
) => HostReply | Promise<HostReply>

/** The integer at `values[i]` (an i32 as the guest passed it); anything else is a broken guest side. */
export function int(values: readonly (number | bigint)[], i: number): number {
  const v = values[i]
  if (typeof v !== 'number' || !Number.isSafeInteger(v))
    throw new TypeError(`host call value ${i} is not an integer`)
  return v
}
