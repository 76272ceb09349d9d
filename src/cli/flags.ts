// CLI flags come from the policy schema's `cli` registry, so a new option appears here by itself.
import { Option } from 'commander'
import type * as z from 'zod'
import { PolicyError } from '../errors.js'
import { type CliMeta, cliRegistry, formatBytes, formatDuration, policySchema } from '../index.js'
import { readEnvFiles } from './env-from.js'

export interface FlagSpec extends CliMeta {
  /** Dotted policy path, e.g. 'limits.memoryBytes'. */
  field: string
  repeatable: boolean
  numeric: boolean
  /** A switch: `--merge-output` alone, no value. */
  boolean: boolean
  /** `K=V` repeated into an object (`--env`). */
  record: boolean
  /** The schema's default as the flag would spell it (`30s`, `512M`, `none`); null when there is none to show. */
  defaultText: string | null
}

const WRAPPERS = new Set(['optional', 'default', 'prefault', 'nullable'])

function innerType(schema: z.ZodType): z.ZodType {
  let s = schema
  while (WRAPPERS.has(s.def.type)) s = (s.def as unknown as { innerType: z.ZodType }).innerType
  return s
}

/** The default of a field as its flag would spell it; null for none (or an empty list). */
function defaultText(schema: z.ZodType, arg: string | undefined): string | null {
  if (schema.def.type !== 'default') return null
  const value: unknown = (schema.def as unknown as { defaultValue: unknown }).defaultValue
  if (typeof value === 'number') {
    return arg === 'DURATION' ? formatDuration(value) : arg === 'SIZE' ? formatBytes(value) : String(value)
  }
  return typeof value === 'string' ? value : null
}

/** What a schema's fields are registered in: the policy's registry, or a face's own copy of it. */
export interface FlagRegistry {
  get(schema: z.ZodType): CliMeta | undefined
}

/**
 * Flags for every registered field, walking into nested objects (limits, clock). `registry`: where the
 * schema registered its fields (`cordon wasm`'s schema, loaded apart from the CLI's bundle, has its own).
 */
export function collect(
  shape: Record<string, z.ZodType>,
  prefix = '',
  registry: FlagRegistry = cliRegistry,
): FlagSpec[] {
  const out: FlagSpec[] = []
  for (const [key, schema] of Object.entries(shape)) {
    const meta = registry.get(schema)
    const inner = innerType(schema)
    const type = inner.def.type
    if (!meta) {
      if (type === 'object') out.push(...collect((inner as z.ZodObject).shape, `${prefix}${key}.`, registry))
      continue
    }
    out.push({
      ...meta,
      field: prefix + key,
      repeatable: type === 'array' || type === 'record',
      record: type === 'record',
      numeric: type === 'number',
      boolean: type === 'boolean',
      defaultText: defaultText(schema, meta.arg),
    })
  }
  return out
}

export const FLAGS: FlagSpec[] = collect(policySchema.shape)

const repeatable = (option: Option) =>
  option.argParser((value: string, previous: string[] = []) => [...previous, value])

/**
 * The one flag that is not a schema field: `--env-from` is CLI-only input that feeds the schema's `env`
 * (see policyInput), so that a secret can reach the sandbox without being written into cordon's argv.
 * (Named so because Node itself intercepts any argument starting with `--env-file`: see env-from.ts.)
 */
const ENV_FILE = repeatable(
  new Option(
    '--env-from <FILE>',
    'set the NAME=VALUE lines of FILE in the sandbox (repeatable; a later file wins, --env wins over all)',
  ),
)

/** Commander's options for flags. The default is shown, not set: the schema applies it when a flag is absent. */
export function optionsFor(flags: readonly FlagSpec[]): Option[] {
  return flags.map((f) => {
    const shown = f.defaultText === null ? f.description : `${f.description} (default: ${f.defaultText})`
    if (f.boolean) return new Option(`--${f.flag}`, f.description)
    const option = new Option(`--${f.flag} <${f.arg ?? 'VALUE'}>`, shown)
    return f.repeatable ? repeatable(option) : option
  })
}

/** The run flags, as `run`, `call` and `mcp` take them; `except`: flags a command gives another meaning. */
export function commanderOptions(except: readonly string[] = []): Option[] {
  return [...optionsFor(FLAGS.filter((f) => !except.includes(f.flag))), ENV_FILE]
}

export const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())

/**
 * Parsed commander values → a policy input object for the schema to validate. `own` is cordon's own
 * environment, where `--env NAME` takes its value from. `flags`: another schema's (`cordon wasm`'s own).
 */
export function policyInput(
  values: Record<string, unknown>,
  own: NodeJS.ProcessEnv = process.env,
  flags: readonly FlagSpec[] = FLAGS,
): Record<string, unknown> {
  const input: Record<string, unknown> = {}
  const files = values.envFrom as string[] | undefined
  for (const f of flags) {
    let value = values[camel(f.flag)]
    if (f.field === 'env' && files) value ??= []
    if (value === undefined) continue
    if (f.numeric && typeof value === 'string' && /^\d+$/.test(value)) value = Number(value)
    if (typeof value === 'string') refuseBareNumber(f, value)
    if (f.record) {
      const explicit = (value as string[]).map((text) => assignment(text, own, f.field))
      const fromFiles = f.field === 'env' ? Object.entries(readEnvFiles(files ?? [])) : []
      value = Object.fromEntries([...fromFiles, ...explicit])
    }
    const path = f.field.split('.')
    let target = input
    for (const part of path.slice(0, -1)) {
      target[part] ??= {}
      target = target[part] as Record<string, unknown>
    }
    target[path.at(-1)!] = value
  }
  return input
}

/**
 * A duration or size flag needs its unit: `--timeout 2` read as 2 ms (the library's number) surprised
 * everyone who meant seconds, and `--memory 512` as 512 bytes.
 */
function refuseBareNumber(f: FlagSpec, value: string): void {
  if (!/^\d+(?:\.\d+)?$/.test(value.trim())) return
  const n = value.trim()
  if (f.arg === 'DURATION')
    throw new PolicyError(f.field, `"${value}" needs a unit: ${n}s or ${n}ms (also m, h)`)
  if (f.arg === 'SIZE')
    throw new PolicyError(f.field, `"${value}" needs a unit: ${n}M, ${n}K or ${n}G (B for bytes)`)
}

/** `K=V`, or `NAME` alone for cordon's own value of NAME: a secret then never appears in an argv. */
function assignment(text: string, own: NodeJS.ProcessEnv, field = 'env'): [string, string] {
  const eq = text.indexOf('=')
  const name = eq >= 0 ? text.slice(0, eq) : text
  // zod drops a __proto__ key without a word (it would be the object's prototype): refused here instead.
  if (name === '__proto__') throw new PolicyError(field, '__proto__ cannot be carried')
  if (eq >= 0) return [name, text.slice(eq + 1)]
  const value = Object.hasOwn(own, text) ? own[text] : undefined
  if (value === undefined) {
    throw new PolicyError(field, `${text} is not set in cordon's environment (give ${text}=VALUE, or set it)`)
  }
  return [text, value]
}

/** The flag that sets a policy field ('writable.2' → '--writable'), for error messages. */
export function flagFor(field: string): string | null {
  const parts = field.split('.')
  for (let n = parts.length; n > 0; n--) {
    const flag = FLAGS.find((f) => f.field === parts.slice(0, n).join('.'))
    if (flag) return `--${flag.flag}`
  }
  return null
}
