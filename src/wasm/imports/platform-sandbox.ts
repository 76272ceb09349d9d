// `platform_sandbox`, the seed's import module (platform-v2 PR #33, crates/wasm-runtime-interface/src/
// sandbox.rs), with its signatures, return codes and bincode 1.3 layout, so its guests run unchanged:
//   sandbox_exec(req_ptr, req_len, resp_ptr, resp_len) -> i32: bytes written, -(needed) when resp_len is
//     short, -1 for a negative pointer or length, a response that does not fit in memory, or no memory.
//   get_timestamp() -> i64 (ms), log_message(level, ptr, len) (0 trace … 4 error, else info),
//   sandbox_status() -> i32 (0 ready, 1 disabled: the seed's later HEAD has it).
// Where the seed is wrong, this is not: a retry after -(needed) with the same request bytes gets the kept
// response and the command does not run again (the seed runs it again); every exec is a cordon run, judged
// by real path, env dropped unless allowed, network off unless allowed; and execs are counted against
// `maxExecs`, denied ones too.
import {
  type ExecOutcome,
  type GuestEnv,
  type HostContext,
  type HostHandler,
  type HostReply,
  inBounds,
  int,
  MAX_CALL_BYTES,
  readGuest,
  type Signature,
  sig,
  writeGuest,
} from '../abi.js'
import { BincodeError, decodeRequest, encodeResult, type SandboxExecResult } from '../bincode.js'

export const MODULE = 'platform_sandbox'

export const SIGNATURES: Readonly<Record<string, Signature>> = {
  sandbox_exec: sig('i32,i32,i32,i32', 'i32'),
  get_timestamp: sig('', 'i64'),
  log_message: sig('i32,i32,i32'),
  sandbox_status: sig('', 'i32'),
}

/** The most of one log line that crosses to the host (the rest is cut, and said to be). */
export const MAX_LOG_LINE = 64 * 1024

/** The guest's side: marshal the arguments, read and write guest memory, ask the host. */
export function guestImports(
  env: GuestEnv,
): Record<string, (...args: number[]) => number | bigint | undefined> {
  const name = (field: string) => `${MODULE}.${field}`
  return {
    sandbox_exec(reqPtr, reqLen, respPtr, respLen) {
      const memory = env.memory()
      const size = memory?.length ?? -1
      // Read only what the host can use: a request in bounds and within the call's size.
      const bytes = reqLen! <= MAX_CALL_BYTES ? readGuest(memory, reqPtr!, reqLen!) : null
      const reply = env.call({
        name: name('sandbox_exec'),
        values: [reqPtr!, reqLen!, respPtr!, respLen!, size],
        ...(bytes ? { bytes } : {}),
      })
      const code = int(reply.values, 0)
      if (code > 0 && reply.bytes && !writeGuest(env.memory(), respPtr!, reply.bytes)) return -1
      return code
    },
    get_timestamp() {
      return BigInt(env.call({ name: name('get_timestamp'), values: [] }).values[0] ?? 0)
    },
    log_message(level, ptr, len) {
      const memory = env.memory()
      const bytes = inBounds(memory, ptr!, len!)
        ? memory.slice(ptr!, ptr! + Math.min(len!, MAX_LOG_LINE))
        : undefined
      env.call({ name: name('log_message'), values: [level!, len!], ...(bytes ? { bytes } : {}) })
      return undefined
    },
    sandbox_status() {
      return int(env.call({ name: name('sandbox_status'), values: [] }).values, 0)
    },
  }
}

/** Why the request's bytes were not read, in the seed's words (answered as ExecutionFailed, as there). */
function unreadable(reqPtr: number, reqLen: number, memorySize: number): string {
  if (reqPtr < 0 || reqLen < 0) return 'negative pointer/length'
  if (memorySize < 0) return 'memory export not found'
  if (reqLen > MAX_CALL_BYTES) return `request larger than ${MAX_CALL_BYTES} bytes`
  return 'memory read out of bounds'
}

/** The seed's `SandboxError`/response for what came of the exec (docs/wasm.md has the table). */
export function responseFor(
  outcome: ExecOutcome,
  command: string,
  overflow: 'truncate' | 'error',
): SandboxExecResult {
  if (outcome.kind === 'disabled') return { err: { kind: 'SandboxDisabled' } }
  if (outcome.kind === 'quota')
    return { err: { kind: 'PolicyViolation', message: `exec quota: ${outcome.maxExecs} execs` } }
  if (outcome.kind === 'invalid') return { err: { kind: 'ExecutionFailed', message: outcome.message } }
  const r = outcome.result
  const message = r.violation?.message ?? r.status
  switch (r.status) {
    case 'ok':
    case 'nonzero-exit':
    case 'signaled':
      break
    case 'output-limit':
      if (overflow === 'error')
        return { err: { kind: 'OutputTooLarge', value: BigInt(r.violation?.limit ?? 0) } }
      break
    case 'timeout':
      return { err: { kind: 'Timeout', value: BigInt(r.violation?.limit ?? 0) } }
    case 'denied':
    case 'not-found':
      return { err: { kind: 'CommandNotAllowed', message: command } }
    case 'memory':
    case 'cpu-time':
    case 'process-limit':
    case 'file-size':
      return { err: { kind: 'PolicyViolation', message: `${r.status}: ${message}` } }
    default:
      return { err: { kind: 'ExecutionFailed', message } }
  }
  return {
    ok: {
      // The seed's `code().unwrap_or(-1)`: no exit code (a signal, a stop at the cap) is -1.
      exitCode: r.exitCode ?? -1,
      stdout: r.stdout,
      stderr: r.stderr,
      durationMs: BigInt(Math.max(0, Math.round(outcome.durationMs))),
    },
  }
}

const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && Buffer.compare(a, b) === 0

/** The host's side, one per guest instance: it keeps the one undelivered response a retry may claim. */
export function hostHandlers(ctx: HostContext): Record<string, HostHandler> {
  /** A response that did not fit (or could not be placed), by the request bytes that made it. */
  let kept: { request: Uint8Array; response: Uint8Array } | null = null

  /** The seed's `write_bytes`: its checks, in its order, against the memory's size at this call. */
  const place = (respPtr: number, respLen: number, size: number, encoded: Uint8Array): HostReply => {
    if (respPtr < 0 || respLen < 0) return { values: [-1] }
    if (encoded.length > respLen) return { values: [-encoded.length] }
    if (size < 0 || respPtr + encoded.length > size) return { values: [-1] }
    return { values: [encoded.length], bytes: encoded }
  }

  return {
    async [`${MODULE}.sandbox_exec`](values, bytes) {
      const [reqPtr, reqLen, respPtr, respLen, size] = [0, 1, 2, 3, 4].map((i) => int(values, i)) as number[]
      // A negative response pointer or length is -1 whatever happens: nothing runs for an answer that
      // cannot be given (the seed runs the command first).
      if (respPtr! < 0 || respLen! < 0) return { values: [-1] }
      if (!bytes) {
        kept = null
        const message = unreadable(reqPtr!, reqLen!, size!)
        return place(respPtr!, respLen!, size!, encodeResult({ err: { kind: 'ExecutionFailed', message } }))
      }
      if (kept && same(kept.request, bytes)) {
        // The retry of a response that did not fit: answered from what was kept, nothing runs again.
        const reply = place(respPtr!, respLen!, size!, kept.response)
        if (int(reply.values, 0) > 0) kept = null
        return reply
      }
      kept = null
      let result: SandboxExecResult
      let command = ''
      try {
        const request = decodeRequest(bytes)
        command = request.command
        const outcome = await ctx.exec({
          argv: [request.command, ...request.args],
          env: request.env,
          stdin: request.stdin,
          workingDirectory: request.workingDirectory,
        })
        result = responseFor(outcome, command, ctx.outputOverflow)
      } catch (error) {
        if (!(error instanceof BincodeError)) throw error
        result = {
          err: { kind: 'ExecutionFailed', message: `invalid sandbox exec payload: ${error.message}` },
        }
      }
      const encoded = encodeResult(result)
      const reply = place(respPtr!, respLen!, size!, encoded)
      if (int(reply.values, 0) < 0) kept = { request: bytes, response: encoded }
      return reply
    },
    [`${MODULE}.get_timestamp`]: () => ({ values: [BigInt(ctx.clock.readMs())] }),
    [`${MODULE}.log_message`](values, bytes) {
      // Out of bounds: dropped, as the seed drops it (it warns on the host's own log).
      if (bytes) ctx.log(int(values, 0), bytes, int(values, 1))
      return { values: [] }
    },
    [`${MODULE}.sandbox_status`]() {
      const state = ctx.execState()
      return { values: [state.enabled && state.remaining !== 0 ? 0 : 1] }
    },
  }
}
