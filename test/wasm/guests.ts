// Test guests: .wat files under guests/, compiled with wabt (wat2wasm as an npm package) at test time.
// `{{REQUEST}}` in a guest becomes the request bytes (escaped into a data segment at 1024) and
// `{{REQUEST_LEN}}` their length, so a guest sends exactly what the TS codec (pinned by the golden
// vectors) made. `{{HEXLOG}}` is the function $hexlog (ptr, len): the bytes as hex, one log line.
import { readFileSync } from 'node:fs'
import wabtInit from 'wabt'
import { decodeResult, encodeRequest, type SandboxExecRequest } from '../../src/wasm/bincode.js'

const wabt = await wabtInit()

/** $hexlog needs `$log` (platform_sandbox.log_message), the digits at 0x200 and scratch at HEX_SCRATCH. */
const HEXLOG = `
  (data (i32.const 0x200) "0123456789abcdef")
  (func $hexlog (param $ptr i32) (param $len i32)
    (local $i i32) (local $b i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $b (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
        (i32.store8 (i32.add (i32.const 0x190000) (i32.shl (local.get $i) (i32.const 1)))
          (i32.load8_u offset=0x200 (i32.shr_u (local.get $b) (i32.const 4))))
        (i32.store8 (i32.add (i32.const 0x190001) (i32.shl (local.get $i) (i32.const 1)))
          (i32.load8_u offset=0x200 (i32.and (local.get $b) (i32.const 15))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $log (i32.const 2) (i32.const 0x190000) (i32.shl (local.get $len) (i32.const 1))))`

const escaped = (bytes: Uint8Array) => [...bytes].map((b) => `\\${b.toString(16).padStart(2, '0')}`).join('')

/** Compiles guests/NAME.wat, with the request (if any) in its data. */
export function guest(name: string, request: Uint8Array = new Uint8Array(0)): Uint8Array {
  const text = readFileSync(new URL(`guests/${name}.wat`, import.meta.url), 'utf8')
    .replaceAll('{{HEXLOG}}', HEXLOG)
    .replaceAll('{{REQUEST}}', escaped(request))
    .replaceAll('{{REQUEST_LEN}}', String(request.length))
  return wat(text, `${name}.wat`)
}

/** Compiles WAT text. */
export function wat(text: string, file = 'inline.wat'): Uint8Array {
  const parsed = wabt.parseWat(file, text, { multi_value: true })
  try {
    parsed.resolveNames()
    parsed.validate()
    return new Uint8Array(parsed.toBinary({}).buffer)
  } finally {
    parsed.destroy()
  }
}

/** A request as the seed's guests send it. */
export function request(
  command: string,
  args: string[] = [],
  more: Partial<SandboxExecRequest> = {},
): Uint8Array {
  return encodeRequest({ command, args, env: [], stdin: null, workingDirectory: null, ...more })
}

/** The hex lines a guest logged with $hexlog (info, source wasm), as bytes. */
export function hexLogs(logs: readonly { level: string; msg: string; source?: unknown }[]): Buffer[] {
  return logs
    .filter((l) => l.source === 'wasm' && l.level === 'info' && /^[0-9a-f]*$/.test(l.msg))
    .map((l) => Buffer.from(l.msg, 'hex'))
}

/** The responses a guest logged with $hexlog, decoded. */
export const responses = (logs: Parameters<typeof hexLogs>[0]) => hexLogs(logs).map((b) => decodeResult(b))

/** A value in an assertion's message: bigints and bytes as text. */
export const show = (value: unknown) =>
  JSON.stringify(value, (_, v: unknown) =>
    typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Buffer.from(v).toString() : v,
  )
