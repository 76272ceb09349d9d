// `cordon call FILE#export --args '[1, 2]' [run flags]`: print the function's value, or the whole result.
import { PolicyError } from '../errors.js'
import { callFunction } from '../index.js'
import { policyInput } from './flags.js'
import { EXIT_BROKEN_PIPE, pipeBroken, print, whileCancelable } from './pipes.js'
import { exitCodeFor } from './run.js'

function parseTarget(target: string): { file: string; exportName: string } {
  const at = target.lastIndexOf('#')
  if (at <= 0 || at === target.length - 1) throw new PolicyError('target', `"${target}" is not FILE#export`)
  return { file: target.slice(0, at), exportName: target.slice(at + 1) }
}

function parseArgs(text: unknown): unknown[] {
  if (text === undefined) return []
  let value: unknown
  try {
    value = JSON.parse(String(text))
  } catch (error) {
    throw new PolicyError('args', `is not JSON: ${(error as Error).message}`)
  }
  if (!Array.isArray(value)) throw new PolicyError('args', 'must be a JSON array of arguments')
  return value
}

/** JSON for values JSON lacks: BigInt as a string with n, Map and Set as tagged entries, typed arrays as arrays. */
function jsonValue(value: unknown): unknown {
  if (typeof value === 'bigint') return `${value}n`
  if (value instanceof Map) return { $map: [...value] }
  if (value instanceof Set) return { $set: [...value] }
  if (ArrayBuffer.isView(value) && !(value instanceof DataView))
    return [...(value as unknown as Iterable<number>)]
  return value
}

/**
 * JSON.stringify of `value` with jsonValue's forms, and "[Circular]" for a reference back into its own
 * ancestors (a structured clone may hold cycles, which JSON.stringify would throw on).
 */
export function toJson(value: unknown): string | undefined {
  // The objects being written, innermost last: a call's holder (`this`) is the innermost one still open.
  const open: { holder: unknown; raw: unknown }[] = []
  const onPath = new Set<unknown>()
  return JSON.stringify(value, function (this: unknown, _key: string, raw: unknown) {
    while (open.length > 0 && open[open.length - 1]!.holder !== this) onPath.delete(open.pop()!.raw)
    if (raw !== null && typeof raw === 'object' && onPath.has(raw)) return '[Circular]'
    const shown = jsonValue(raw)
    if (shown !== null && typeof shown === 'object') {
      open.push({ holder: shown, raw })
      onPath.add(raw)
    }
    return shown
  })
}

/**
 * The value as `cordon call` prints it: whole, a string raw (like `jq -r`), anything else as one line of
 * JSON (see toJson); null for undefined, which prints nothing.
 */
export function printedValue(value: unknown): string | null {
  if (typeof value === 'string') return value
  return toJson(value) ?? null
}

export async function callCommand(target: string, values: Record<string, unknown>): Promise<number> {
  const { file, exportName } = parseTarget(target)
  const json = values.json === true
  // Without --json, stdout carries only the value: what the function prints goes to stderr, live.
  const result = await whileCancelable((signal) =>
    callFunction(file, exportName, parseArgs(values.args), {
      ...policyInput(values),
      signal,
      spawner: false,
      ...(json ? {} : { onOutput: (chunk: { data: string }) => print(process.stderr, chunk.data) }),
    }),
  )
  if (pipeBroken()) return EXIT_BROKEN_PIPE
  if (json) {
    print(process.stdout, `${toJson(result)}\n`)
  } else {
    if ('value' in result) {
      const text = printedValue(result.value)
      if (text !== null) print(process.stdout, `${text}\n`)
    }
    if (result.error)
      print(process.stderr, `${result.error.stack ?? `${result.error.name}: ${result.error.message}`}\n`)
    else if (result.violation)
      print(process.stderr, `cordon: ${result.status}: ${result.violation.message}\n`)
  }
  return exitCodeFor(result)
}
