// `cordon`, the native import module: JSON in, a handle out, so a result never has to fit a buffer the guest
// guessed and nothing ever runs twice.
//   exec(req_ptr, req_len) -> handle > 0, or -1 bad pointer, -2 invalid request (the reason is logged),
//     -3 exec quota used up, -4 exec disabled, -5 request over 1 MiB, -6 16 results already held
//   result_len(h) -> bytes of the result's JSON, or -1 for an unknown handle
//   result_read(h, ptr, len, offset) -> bytes copied (at most len, from offset), or -1
//   result_free(h) -> 0, or -1 for an unknown handle
//   now_ms() -> i64, log(level, ptr, len), exec_count() -> i32, exec_remaining() -> i32 (0 when exec is off)
// The request: {"cmd": ["prog", "arg"…], "stdin"?: "text" | {"base64": "…"}, "env"?: {NAME: "value"},
// "cwd"?: "relative/dir", "encoding"?: "utf8" | "base64"} (unknown fields are refused). The result: the
// run's status, exitCode, signal, stdout, stderr (text, or base64), truncated, outputBytes, wallMs, violation.
import {
  type GuestEnv,
  type HostContext,
  type HostHandler,
  inBounds,
  int,
  MAX_CALL_BYTES,
  readGuest,
  type Signature,
  sig,
  writeGuest,
} from '../abi.js'
import { MAX_LOG_LINE } from './platform-sandbox.js'

export const MODULE = 'cordon'

export const SIGNATURES: Readonly<Record<string, Signature>> = {
  exec: sig('i32,i32', 'i32'),
  result_len: sig('i32', 'i32'),
  result_read: sig('i32,i32,i32,i32', 'i32'),
  result_free: sig('i32', 'i32'),
  now_ms: sig('', 'i64'),
  log: sig('i32,i32,i32'),
  exec_count: sig('', 'i32'),
  exec_remaining: sig('', 'i32'),
}

export const EXEC_ERRORS = {
  badPointer: -1,
  invalid: -2,
  quota: -3,
  disabled: -4,
  tooLarge: -5,
  tooManyHeld: -6,
} as const
export const MAX_HELD = 16
const MAX_ARGS = 1024
const MAX_ENV = 256

export function guestImports(
  env: GuestEnv,
): Record<string, (...args: number[]) => number | bigint | undefined> {
  const call = (field: string, values: number[], bytes?: Uint8Array | null) =>
    env.call({ name: `${MODULE}.${field}`, values, ...(bytes ? { bytes } : {}) })
  return {
    exec(ptr, len) {
      const bytes = len! <= MAX_CALL_BYTES ? readGuest(env.memory(), ptr!, len!) : null
      return int(call('exec', [ptr!, len!], bytes).values, 0)
    },
    result_len: (h) => int(call('result_len', [h!]).values, 0),
    result_read(h, ptr, len, offset) {
      const reply = call('result_read', [h!, ptr!, len!, offset!, env.memory()?.length ?? -1])
      const n = int(reply.values, 0)
      if (n > 0 && reply.bytes && !writeGuest(env.memory(), ptr!, reply.bytes)) return -1
      return n
    },
    result_free: (h) => int(call('result_free', [h!]).values, 0),
    now_ms: () => BigInt(call('now_ms', []).values[0] ?? 0),
    log(level, ptr, len) {
      const memory = env.memory()
      const bytes = inBounds(memory, ptr!, len!)
        ? memory.slice(ptr!, ptr! + Math.min(len!, MAX_LOG_LINE))
        : null
      call('log', [level!, len!], bytes)
      return undefined
    },
    exec_count: () => int(call('exec_count', []).values, 0),
    exec_remaining: () => int(call('exec_remaining', []).values, 0),
  }
}

interface Request {
  cmd: string[]
  stdin: Uint8Array | null
  env: [string, string][]
  cwd: string | null
  encoding: 'utf8' | 'base64'
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** The request, or why it is refused. */
export function parseRequest(bytes: Uint8Array): Request | string {
  let raw: unknown
  try {
    raw = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch (error) {
    return `not JSON in UTF-8: ${(error as Error).message}`
  }
  if (!isObject(raw)) return 'must be a JSON object'
  for (const key of Object.keys(raw))
    if (!['cmd', 'stdin', 'env', 'cwd', 'encoding'].includes(key)) return `unknown field "${key}"`
  const { cmd, stdin, env, cwd, encoding } = raw
  if (
    !Array.isArray(cmd) ||
    cmd.length === 0 ||
    cmd.length > MAX_ARGS ||
    !cmd.every((a) => typeof a === 'string')
  )
    return `cmd must be an array of 1 to ${MAX_ARGS} strings`
  let input: Uint8Array | null = null
  if (typeof stdin === 'string') input = new TextEncoder().encode(stdin)
  else if (isObject(stdin) && Object.keys(stdin).length === 1 && typeof stdin.base64 === 'string')
    input = new Uint8Array(Buffer.from(stdin.base64, 'base64'))
  else if (stdin !== undefined) return 'stdin must be a string or {"base64": "…"}'
  const pairs: [string, string][] = []
  if (env !== undefined) {
    if (!isObject(env)) return 'env must be an object of strings'
    for (const [k, v] of Object.entries(env)) {
      if (typeof v !== 'string') return `env.${k} must be a string`
      pairs.push([k, v])
    }
    if (pairs.length > MAX_ENV) return `env must have at most ${MAX_ENV} variables`
  }
  if (cwd !== undefined && typeof cwd !== 'string') return 'cwd must be a string'
  if (encoding !== undefined && encoding !== 'utf8' && encoding !== 'base64')
    return 'encoding must be "utf8" or "base64"'
  return { cmd: cmd as string[], stdin: input, env: pairs, cwd: cwd ?? null, encoding: encoding ?? 'utf8' }
}

export function hostHandlers(ctx: HostContext): Record<string, HostHandler> {
  const held = new Map<number, Uint8Array>()
  let next = 1
  const name = (field: string) => `${MODULE}.${field}`
  const refuse = (reason: string) => {
    ctx.note(`cordon.exec: invalid request: ${reason}`)
    return { values: [EXEC_ERRORS.invalid] }
  }
  return {
    async [name('exec')](values, bytes) {
      const len = int(values, 1)
      if (len > MAX_CALL_BYTES) return { values: [EXEC_ERRORS.tooLarge] }
      if (!bytes) return { values: [EXEC_ERRORS.badPointer] }
      const state = ctx.execState()
      if (!state.enabled) return { values: [EXEC_ERRORS.disabled] }
      if (state.remaining === 0) return { values: [EXEC_ERRORS.quota] }
      if (held.size >= MAX_HELD) return { values: [EXEC_ERRORS.tooManyHeld] }
      const request = parseRequest(bytes)
      if (typeof request === 'string') return refuse(request)
      const outcome = await ctx.exec({
        argv: request.cmd,
        env: request.env,
        stdin: request.stdin,
        workingDirectory: request.cwd,
      })
      if (outcome.kind === 'disabled') return { values: [EXEC_ERRORS.disabled] }
      if (outcome.kind === 'quota') return { values: [EXEC_ERRORS.quota] }
      if (outcome.kind === 'invalid') return refuse(outcome.message)
      const r = outcome.result
      const text = (b: Buffer) => (request.encoding === 'base64' ? b.toString('base64') : b.toString('utf8'))
      const json = JSON.stringify({
        status: r.status,
        exitCode: r.exitCode,
        signal: r.signal,
        stdout: text(r.stdout),
        stderr: text(r.stderr),
        encoding: request.encoding,
        truncated: r.truncated,
        outputBytes: r.outputBytes,
        wallMs: outcome.durationMs,
        violation: r.violation,
      })
      const handle = next++
      held.set(handle, new TextEncoder().encode(json))
      return { values: [handle] }
    },
    [name('result_len')]: (values) => ({ values: [held.get(int(values, 0))?.length ?? -1] }),
    [name('result_read')](values) {
      const [h, ptr, len, offset, size] = [0, 1, 2, 3, 4].map((i) => int(values, i)) as number[]
      const result = held.get(h!)
      if (!result || len! < 0 || offset! < 0 || offset! > result.length) return { values: [-1] }
      const bytes = result.subarray(offset!, offset! + Math.min(len!, MAX_CALL_BYTES))
      if (ptr! < 0 || size! < 0 || ptr! + bytes.length > size!) return { values: [-1] }
      return { values: [bytes.length], bytes }
    },
    [name('result_free')]: (values) => ({ values: [held.delete(int(values, 0)) ? 0 : -1] }),
    [name('now_ms')]: () => ({ values: [BigInt(ctx.clock.readMs())] }),
    [name('log')](values, bytes) {
      if (bytes) ctx.log(int(values, 0), bytes, int(values, 1))
      return { values: [] }
    },
    [name('exec_count')]: () => ({ values: [ctx.execState().count] }),
    [name('exec_remaining')]() {
      const { enabled, remaining } = ctx.execState()
      return { values: [enabled ? (remaining ?? -1) : 0] }
    },
  }
}
