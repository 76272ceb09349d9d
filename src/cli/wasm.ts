// `cordon wasm MODULE.wasm [wasm flags] [run flags] [-- WASI args]`: run a WebAssembly guest whose execs
// are sandboxes under the run flags. The wasm flags come from `cordon/wasm`'s own schema (loaded from
// dist/wasm/, apart from the CLI's bundle, only for this command); the run flags are `cordon run`'s, but
// --clock, which here is the guest's clock.
import type { Option } from 'commander'
import { PolicyError } from '../errors.js'
import type { WasmResult } from '../wasm/index.js'
import { collect, commanderOptions, type FlagSpec, flagFor, optionsFor, policyInput } from './flags.js'
import { EXIT_BROKEN_PIPE, pipeBroken, print, whileCancelable } from './pipes.js'
import { exitCodeFor } from './run.js'

/** Run flags that `cordon wasm` gives another meaning. */
const TAKEN = ['clock']

let wasmFlags: FlagSpec[] | null = null

/** The wasm flags (loading the WASM face's schema once). */
async function flags(): Promise<FlagSpec[]> {
  if (!wasmFlags) {
    const { wasmOptionsSchema, wasmFlagRegistry } = await import('../wasm/options.js')
    wasmFlags = collect(wasmOptionsSchema.shape, '', wasmFlagRegistry)
  }
  return wasmFlags
}

/** The command's options: the wasm flags, then the run flags for the execs. */
export async function wasmCommandOptions(): Promise<Option[]> {
  return [...optionsFor(await flags()), ...commanderOptions(TAKEN)]
}

/** A field of the wasm options as the flag that sets it (`exec.options.limits.wallTimeMs` → `--timeout`). */
function flagOf(field: string, wasm: readonly FlagSpec[]): string {
  if (field.startsWith('exec.options.')) return flagFor(field.slice('exec.options.'.length)) ?? field
  const parts = field.split('.')
  for (let n = parts.length; n > 0; n--) {
    const flag = wasm.find((f) => f.field === parts.slice(0, n).join('.'))
    if (flag) return `--${flag.flag}`
  }
  return field
}

/** JSON of a WasmResult: an i64 value as its digits. */
const json = (result: WasmResult) =>
  JSON.stringify(result, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))

export async function wasmCommand(
  file: string,
  wasiArgs: string[],
  values: Record<string, unknown>,
): Promise<number> {
  const wasm = await flags()
  const { runWasm } = await import('../wasm/index.js')
  const asJson = values.json === true
  const { clock: _, ...runValues } = values
  const input = flagged(
    () => policyInput(values, process.env, wasm),
    (field) => flagOf(field, wasm),
  )
  const execOptions = flagged(
    () => policyInput(runValues),
    (field) => flagFor(field) ?? field,
  )
  const options = {
    ...input,
    ...(wasiArgs.length > 0 ? { argv: [file.split('/').at(-1) ?? file, ...wasiArgs] } : {}),
    exec: { ...(input.exec as Record<string, unknown> | undefined), options: execOptions },
  }
  return flagged(
    async () => {
      const result = await whileCancelable((signal) =>
        runWasm(file, {
          ...options,
          signal,
          ...(asJson
            ? {}
            : {
                onOutput: (chunk) =>
                  print(chunk.stream === 'stdout' ? process.stdout : process.stderr, chunk.data),
                onLog: (entry) => print(process.stderr, `[${entry.source} ${entry.level}] ${entry.msg}\n`),
              }),
        }),
      )
      if (pipeBroken()) return EXIT_BROKEN_PIPE
      if (asJson) print(process.stdout, `${json(result)}\n`)
      else {
        if (result.value !== null && values.invoke !== undefined) print(process.stdout, `${result.value}\n`)
        if (result.violation) print(process.stderr, `cordon: ${result.status}: ${result.violation.message}\n`)
      }
      return exitCodeFor({ status: result.status, exitCode: result.exitCode, signal: null })
    },
    (field) => flagOf(field, wasm),
  )
}

/** `body`, its PolicyError named by the flag (`flag(field)`) rather than the option's field. */
function flagged<T>(body: () => T, flag: (field: string) => string): T {
  const rename = (error: unknown): never => {
    if (error instanceof PolicyError) throw new PolicyError(flag(error.field), error.reason)
    throw error
  }
  try {
    const out = body()
    return (out instanceof Promise ? out.catch(rename) : out) as T
  } catch (error) {
    return rename(error)
  }
}
