// A key's ceilings: the most a request made with it may ask. A request over one is refused (403
// `over-ceiling`, naming the field and the ceiling); what a request leaves unset gets the lesser of the
// default and the ceiling. A key without a ceiling for a field leaves that field to the request, but for
// the network: no network ceiling is `none`. What a request can only narrow (allow, deny, denySyscalls,
// redact) needs no ceiling.
import { allowEntryWithin, formatLimit, policySchema } from '../index.js'
import { type Ceilings, keyCeilings, LIMIT_NAMES } from './key-schema.js'
import type { RunRequest } from './request.js'
import { type KeyRecord, type RunBounds, ServiceError } from './types.js'

type Options = RunRequest['options']
type Network = NonNullable<Options['network']>
type Allowlist = Exclude<Network, string>

const over = (field: string, asked: string, ceiling: string, whose: 'key' | 'server' = 'key') =>
  new ServiceError('over-ceiling', `${field}: ${asked} is over this ${whose}'s ceiling of ${ceiling}`, field)

/** A limit's ceiling for every key, whatever its own: what the server process itself holds per run. */
export type ServerLimitCeilings = Partial<Record<(typeof LIMIT_NAMES)[number], number>>

/**
 * The server's own ceilings by default. A run's output and logs are held by the server process (in the
 * engine's result, as text and as events) as well as stored: a key made without ceilings could otherwise
 * ask for gigabytes of them (300 MB of output took a server to 2.1 GiB of RSS). A run's wall time holds
 * one of the server's few slots (`--concurrency`, 2 by default): 1 h, as E2B's base tier bounds a
 * sandbox's life, far past what judges allow (Judge0: 20 s), room for a build or a test suite. Raise them
 * with ServiceOptions.limitCeilings (`--max-output`, `--max-log`, `--max-wall-time`).
 */
export const DEFAULT_SERVER_LIMIT_CEILINGS: ServerLimitCeilings = {
  maxOutputBytes: 16 * 1024 * 1024,
  maxLogBytes: 16 * 1024 * 1024,
  wallTimeMs: 60 * 60 * 1000,
}

/**
 * The most a run's workspace may hold, whatever its key (`--max-workspace`): 1 GiB, room for a build's
 * objects or a test suite's fixtures. As root it is a tmpfs, RAM charged to the run's memory limit, so a
 * run's files and its memory share `memoryBytes` besides; not as root it is disk, measured as the run runs.
 */
export const DEFAULT_MAX_WORKSPACE_BYTES = 1024 * 1024 * 1024

/**
 * How long a finished run is kept at most, whatever its key's retention (a key without one kept its runs,
 * output and files, forever): 30 days. `--max-retention` raises it.
 */
export const DEFAULT_MAX_RETENTION_MS = 30 * 24 * 60 * 60 * 1000

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** Whether the body as sent set `options.<path>` itself (rather than a default filling it in). */
function asked(raw: unknown, ...path: string[]): boolean {
  let at: unknown = isObject(raw) ? raw.options : undefined
  for (const key of path) {
    if (!isObject(at) || !Object.hasOwn(at, key)) return false
    at = at[key]
  }
  return at !== undefined
}

/**
 * `request` (parsed, defaults applied) within `key`'s ceilings; `raw` is the body as sent, to tell what
 * the client asked from what a default filled in. Throws ServiceError('over-ceiling') naming the field,
 * or ('forbidden-option') for an `env` entry that would override one of the key's secrets.
 */
export function applyCeilings(
  key: KeyRecord,
  raw: unknown,
  request: RunRequest,
  server: ServerLimitCeilings = {},
): RunRequest {
  const ceilings = keyCeilings(key)
  const options: Options = { ...request.options }
  checkSecrets(key, options)
  options.limits = limitsWithin(ceilings, raw, options.limits, server)
  options.network = networkWithin(ceilings.network, options.network ?? 'none')
  if (ceilings.isolation) {
    // A pinned tier: `auto` (asked or the default) runs it; another tier is refused.
    if (
      options.isolation !== undefined &&
      options.isolation !== 'auto' &&
      options.isolation !== ceilings.isolation
    )
      throw over('options.isolation', `"${options.isolation}"`, `"${ceilings.isolation}" (pinned)`)
    options.isolation = ceilings.isolation
  }
  if (ceilings.rootfs && options.rootfs !== undefined && !ceilings.rootfs.includes(options.rootfs)) {
    const names = ceilings.rootfs.map((n) => `"${n}"`).join(', ') || 'none'
    throw over('options.rootfs', `"${options.rootfs}"`, names)
  }
  return { ...request, options }
}

/** The key's secrets are set by the server in every run: a request cannot replace or unset one. */
function checkSecrets(key: KeyRecord, options: Options): void {
  for (const name of Object.keys(options.env ?? {})) {
    if (Object.hasOwn(key.secrets, name))
      throw new ServiceError(
        'forbidden-option',
        `options.env.${name}: is one of this key's secrets, set by the server`,
        `options.env.${name}`,
      )
  }
}

/** The library's default limits: what a request that sets none runs with. */
const DEFAULT_LIMITS = policySchema.shape.limits.parse({})

function limitsWithin(
  ceilings: Ceilings,
  raw: unknown,
  limits: Options['limits'],
  server: ServerLimitCeilings,
): Options['limits'] {
  if (!ceilings.limits && Object.keys(server).length === 0) return limits
  const out = { ...(limits ?? DEFAULT_LIMITS) }
  for (const name of LIMIT_NAMES) {
    // The lower of the key's ceiling and the server's bounds; the refusal names the one that did.
    const mine = ceilings.limits?.[name]
    const theirs = server[name]
    const ceiling = mine === undefined ? theirs : theirs === undefined ? mine : Math.min(mine, theirs)
    if (ceiling === undefined) continue
    if (out[name] <= ceiling) continue
    if (asked(raw, 'limits', name))
      throw over(
        `options.limits.${name}`,
        formatLimit(name, out[name]),
        formatLimit(name, ceiling),
        ceiling === mine ? 'key' : 'server',
      )
    out[name] = ceiling
  }
  return out
}

/** `key`'s bounds under the server's ceilings `server`: what limitsWithin and networkWithin hold a run to. */
export function runBounds(key: KeyRecord, server: ServerLimitCeilings = {}): RunBounds {
  const ceilings = keyCeilings(key)
  const limits = {} as RunBounds['limits']
  for (const name of LIMIT_NAMES) {
    const mine = ceilings.limits?.[name]
    const theirs = server[name]
    const ceiling =
      mine === undefined ? (theirs ?? null) : theirs === undefined ? mine : Math.min(mine, theirs)
    limits[name] = { default: Math.min(DEFAULT_LIMITS[name], ceiling ?? Infinity), ceiling }
  }
  return { limits, network: ceilings.network ?? 'none' }
}

const MODE = (network: Network) => (typeof network === 'string' ? network : 'allow')

/**
 * `network` within the key's ceiling. A key without one gets `none`: `host` reaches every service on the
 * server's loopback (the server's own API included), and an allowlist the hosts it names, so either is
 * granted by name on the key (`ceilings.network`), never by leaving it out.
 */
function networkWithin(given: Ceilings['network'], network: Network): Network {
  const ceiling = given ?? 'none'
  if (ceiling === 'host') return network
  const mode = MODE(network)
  if (mode === 'none') return network
  const field = 'options.network'
  if (Array.isArray(ceiling)) {
    if (!ceiling.includes(mode)) throw over(field, `"${mode}"`, `${ceiling.map((m) => `"${m}"`).join(', ')}`)
    if (mode === 'host') return network
    // The list form allows public hosts only: loopback and private ranges are the server's own network.
    return withinReach(
      network as Allowlist,
      { allowLoopback: false, allowPrivate: false, allowMetadata: false },
      field,
    )
  }
  if (ceiling === 'none') throw over(field, `"${mode}"`, '"none"')
  // An allowlist ceiling: the request's allowlist within it, and its deny rules added.
  if (mode === 'host') throw over(field, '"host"', 'an allowlist')
  const list = withinReach(network as Allowlist, ceiling, field)
  list.allow.forEach((entry, i) => {
    if (!ceiling.allow.some((bound) => allowEntryWithin(entry, bound)))
      throw over(
        `${field}.allow.${i}`,
        `"${entry}"`,
        `allow [${ceiling.allow.map((e) => `"${e}"`).join(', ')}]`,
      )
  })
  return { ...list, deny: [...new Set([...list.deny, ...ceiling.deny])] }
}

function withinReach(
  list: Allowlist,
  bound: Pick<Allowlist, 'allowLoopback' | 'allowPrivate' | 'allowMetadata'>,
  field: string,
): Allowlist {
  for (const flag of ['allowLoopback', 'allowPrivate', 'allowMetadata'] as const) {
    if (list[flag] && !bound[flag]) throw over(`${field}.${flag}`, 'true', 'false')
  }
  return { ...list }
}
