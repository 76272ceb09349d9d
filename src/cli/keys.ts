// `cordon keys create`'s flags: everything `POST /v1/keys` takes, mapped onto that very body, which the
// service's key schema (src/service/key-schema.ts) then validates, as it does the HTTP request's. A
// ceiling flag is the `run` flag it bounds, with `max-` in front unless it has it (`--timeout` →
// `--max-timeout`, `--max-output` → `--max-output`). `--body FILE|-` gives the whole body as JSON; flags
// given with it win. A secret's value need not be in cordon's argv: `--secret-from-env NAME`.
import { readFileSync } from 'node:fs'
import { InvalidArgumentError, Option } from 'commander'
import { FLAGS } from './flags.js'

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())

/** The ceiling flag of each limit: its `run` flag, `max-` in front unless it has it. */
export const CEILING_FLAGS = FLAGS.filter((f) => f.field.startsWith('limits.')).map((f) => ({
  flag: f.flag.startsWith('max-') ? f.flag : `max-${f.flag}`,
  limit: f.field.slice('limits.'.length),
  arg: f.arg ?? 'VALUE',
  runFlag: f.flag,
}))

const count = (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError('must be a whole number from 1')
  return Number(value)
}
const repeat = (value: string, previous: string[] = []) => [...previous, value]

export function keyCreateOptions(): Option[] {
  return [
    new Option('--name <NAME>', 'what the key is for (required, here or in --body)'),
    new Option(
      '--scopes <LIST>',
      'comma-separated: runs:write, runs:read, admin (default: runs:write,runs:read)',
    ),
    ...CEILING_FLAGS.map(
      (c) => new Option(`--${c.flag} <${c.arg}>`, `the most --${c.runFlag} a run of the key may ask`),
    ),
    new Option(
      '--network <LIST>',
      'the network modes its runs may ask: none, host, or a comma-separated list of none, allow, host (default: none)',
    ),
    new Option('--isolation <TIER>', 'pins the tier its runs take: namespace or process'),
    new Option('--rootfs <NAME>', 'a root filesystem its runs may name (repeatable)').argParser(repeat),
    new Option('--concurrent-runs <N>', 'its runs queued or running at once, at most').argParser(count),
    new Option('--runs-per-minute <N>', 'its runs started per minute, at most').argParser(count),
    new Option(
      '--secret <NAME=VALUE>',
      "an environment variable set in every run of the key, always redacted (repeatable; the value is in cordon's argv: prefer --secret-from-env)",
    ).argParser(repeat),
    new Option(
      '--secret-from-env <NAME>',
      "a secret whose value is cordon's own $NAME (repeatable)",
    ).argParser(repeat),
    new Option('--retention <DURATION>', 'how long its finished runs are kept (30d, 12h; default: forever)'),
    new Option('--body <FILE|->', 'the whole POST /v1/keys body as JSON (- for stdin); flags win over it'),
  ]
}

/** A flag's refusal, said as `cordon: --flag: reason` (exit 125) by the keys commands. */
export class KeyFlagError extends Error {
  constructor(
    readonly flag: string,
    reason: string,
  ) {
    super(reason)
    this.name = 'KeyFlagError'
  }
}

const object = (value: unknown): Record<string, unknown> =>
  value && typeof value === 'object' && !Array.isArray(value) ? { ...(value as Record<string, unknown>) } : {}

/** The POST /v1/keys body the flags say (over --body's); validated by the key schema, not here. */
export function keyCreateBody(
  values: Record<string, unknown>,
  own: NodeJS.ProcessEnv = process.env,
  readBody: (file: string) => string = (file) => readFileSync(file === '-' ? 0 : file, 'utf8'),
): Record<string, unknown> {
  let body: Record<string, unknown> = {}
  if (typeof values.body === 'string') {
    let parsed: unknown
    try {
      parsed = JSON.parse(readBody(values.body))
    } catch (error) {
      throw new KeyFlagError('--body', (error as Error).message)
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new KeyFlagError('--body', 'must be a JSON object')
    body = parsed as Record<string, unknown>
  }
  if (typeof values.name === 'string') body.name = values.name
  if (typeof values.scopes === 'string') body.scopes = values.scopes.split(',').map((s) => s.trim())
  else body.scopes ??= ['runs:write', 'runs:read']

  const ceilings = object(body.ceilings)
  const limits = object(ceilings.limits)
  for (const c of CEILING_FLAGS) {
    const value = values[camel(c.flag)]
    if (typeof value !== 'string') continue
    const bare = /^\d+(?:\.\d+)?$/.test(value.trim())
    // As `run` refuses `--timeout 2`: a duration or a size needs its unit.
    if (bare && c.arg === 'DURATION')
      throw new KeyFlagError(`--${c.flag}`, `"${value}" needs a unit: ${value}s or ${value}ms`)
    if (bare && c.arg === 'SIZE')
      throw new KeyFlagError(`--${c.flag}`, `"${value}" needs a unit: ${value}M, ${value}K or ${value}G`)
    limits[c.limit] = bare ? Number(value) : value
  }
  if (Object.keys(limits).length > 0) ceilings.limits = limits
  if (typeof values.network === 'string') {
    const modes = values.network.split(',').map((s) => s.trim())
    ceilings.network = modes.length === 1 && (modes[0] === 'none' || modes[0] === 'host') ? modes[0] : modes
  }
  if (typeof values.isolation === 'string') ceilings.isolation = values.isolation
  if (Array.isArray(values.rootfs)) ceilings.rootfs = values.rootfs
  body.ceilings = ceilings

  if (values.concurrentRuns !== undefined || values.runsPerMinute !== undefined) {
    const quota = object(body.quota)
    if (values.concurrentRuns !== undefined) quota.concurrentRuns = values.concurrentRuns
    if (values.runsPerMinute !== undefined) quota.runsPerMinute = values.runsPerMinute
    body.quota = quota
  }

  const secrets = object(body.secrets)
  for (const text of (values.secret as string[] | undefined) ?? []) {
    const eq = text.indexOf('=')
    if (eq <= 0) throw new KeyFlagError('--secret', `"${text.slice(0, 40)}" is not NAME=VALUE`)
    secrets[text.slice(0, eq)] = text.slice(eq + 1)
  }
  for (const name of (values.secretFromEnv as string[] | undefined) ?? []) {
    const value = Object.hasOwn(own, name) ? own[name] : undefined
    if (value === undefined)
      throw new KeyFlagError('--secret-from-env', `${name} is not set in cordon's environment`)
    secrets[name] = value
  }
  if (Object.keys(secrets).length > 0) body.secrets = secrets
  if (typeof values.retention === 'string') body.retention = values.retention
  return body
}

/** The flag that sets a body field (a zod issue's path), for an error; `--body` for what no flag sets. */
export function keyFlagFor(path: readonly PropertyKey[]): string {
  const [a, b, c] = path.map(String)
  if (a === 'name' || a === 'scopes' || a === 'retention') return `--${a}`
  if (a === 'secrets') return '--secret'
  if (a === 'quota') return b === 'runsPerMinute' ? '--runs-per-minute' : '--concurrent-runs'
  if (a === 'ceilings' && b === 'limits') {
    const ceiling = CEILING_FLAGS.find((f) => f.limit === c)
    if (ceiling) return `--${ceiling.flag}`
  }
  if (a === 'ceilings' && (b === 'network' || b === 'isolation' || b === 'rootfs')) return `--${b}`
  return '--body'
}
