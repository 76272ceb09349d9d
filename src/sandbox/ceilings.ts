// A sandbox's options are ceilings for its runs: a run may tighten them, never loosen them. A run asking
// for more than its sandbox allows (a limit, a network, a writable path, a passed variable, another tier
// or root filesystem) is refused with a PolicyError naming the field and both values; what a run can only
// add to (hide, deny, denySyscalls, redact, a network's deny) is added to the sandbox's, not put in its
// place. One grader's sandbox with `wallTimeMs: '2s'` and `network: 'none'` used to run a submission
// that asked `{ limits: { wallTimeMs: '1h' }, network: 'host' }` with both.
import path from 'node:path'
import { PolicyError } from '../errors.js'
import { allowEntryWithin } from '../net/within.js'
import { type AnyRunOptions, defaultHide, type Policy, parsePolicy } from '../policy/schema.js'
import { formatLimit } from '../policy/units.js'

type Raw = Record<string, unknown>
type Network = Policy['network']
type Allowlist = Exclude<Network, string>

const refused = (field: string, asked: string, allowed: string) =>
  new PolicyError(
    field,
    `${asked} is over this sandbox's ${allowed}: a run may tighten its sandbox, never loosen it`,
  )

const list = (items: readonly unknown[]) => `[${items.map((i) => JSON.stringify(String(i))).join(', ')}]`
const union = <T>(a: readonly T[] | undefined, b: readonly T[] | undefined): T[] => [
  ...new Set([...(a ?? []), ...(b ?? [])]),
]

/** `p` is `root` or inside it (both resolved: no `..` passes for a way out). */
const inside = (p: string, root: string) => {
  const rel = path.relative(path.resolve(root), path.resolve(p))
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel))
}

function networkWithin(base: Network, asked: Network): Network {
  if (base === 'host' || asked === 'none') return asked
  const shown = (n: Network) => (typeof n === 'string' ? `"${n}"` : `allow ${list(n.allow)}`)
  if (base === 'none' || asked === 'host') throw refused('network', shown(asked), shown(base))
  const bound = base as Allowlist
  const mine = asked as Allowlist
  for (const flag of ['allowLoopback', 'allowPrivate', 'allowMetadata'] as const)
    if (mine[flag] && !bound[flag]) throw refused(`network.${flag}`, 'true', 'false')
  mine.allow.forEach((entry, i) => {
    if (!bound.allow.some((b) => allowEntryWithin(entry, b)))
      throw refused(`network.allow.${i}`, `"${entry}"`, `allow ${list(bound.allow)}`)
  })
  // The sandbox's deny rules hold in every run.
  return { ...mine, deny: union(mine.deny, bound.deny) }
}

/** How strong a tier is: `auto` is the namespace tier where there is one, else the process tier. */
const TIER_RANK = { process: 0, auto: 1, namespace: 2 } as const

/**
 * The options of a run of a sandbox whose own are `base`, given `over` (the run's): `merged` (base with
 * over on it) checked against base, and with what a run adds to put beside the sandbox's. Throws
 * PolicyError naming the field past its sandbox's.
 */
export function withinSandbox(base: AnyRunOptions, over: AnyRunOptions, merged: Raw): Raw {
  const asked = over as Raw
  if (Object.keys(asked).length === 0) return merged
  // Both as the library reads them (units, defaults, the allow: form): a limit the sandbox left unset is
  // its default, which a run may not pass either.
  const b = parsePolicy(base)
  const m = parsePolicy(merged)
  const out: Raw = { ...merged }

  const limits = (asked.limits ?? {}) as Raw
  for (const name of Object.keys(limits) as (keyof Policy['limits'])[]) {
    if (limits[name] === undefined) continue
    if (m.limits[name] > b.limits[name])
      throw refused(`limits.${name}`, formatLimit(name, m.limits[name]), formatLimit(name, b.limits[name]))
  }
  if (asked.network !== undefined) out.network = networkWithin(b.network, m.network)
  if (asked.writable !== undefined)
    m.writable.forEach((p, i) => {
      if (!b.writable.some((root) => inside(p, root)))
        throw refused(`writable.${i}`, `"${p}"`, `writable ${list(b.writable)}`)
    })
  // Strict mode: what a run may see is the sandbox's list; a sandbox that is not strict may be made so.
  const visible = b.readable ? [...b.readable, ...b.writable, ...(b.cwd ? [b.cwd] : [])] : null
  if (visible && asked.readable !== undefined)
    (m.readable ?? []).forEach((p, i) => {
      if (!visible.some((root) => inside(p, root)))
        throw refused(`readable.${i}`, `"${p}"`, `readable ${list(visible)}`)
    })
  if (
    visible &&
    asked.cwd !== undefined &&
    m.cwd !== undefined &&
    !visible.some((r) => inside(m.cwd as string, r))
  )
    throw refused('cwd', `"${m.cwd}"`, `readable ${list(visible)}`)
  if (asked.passEnv !== undefined)
    m.passEnv.forEach((name, i) => {
      if (!b.passEnv.includes(name)) throw refused(`passEnv.${i}`, `"${name}"`, `passEnv ${list(b.passEnv)}`)
    })
  // Commands: a sandbox's allowlist bounds a run's; a run's empty list (all commands) keeps the sandbox's.
  if (asked.allow !== undefined && b.allow.length > 0) {
    if (m.allow.length === 0) out.allow = b.allow
    m.allow.forEach((cmd, i) => {
      if (!b.allow.includes(cmd)) throw refused(`allow.${i}`, `"${cmd}"`, `allow ${list(b.allow)}`)
    })
  }
  if (asked.isolation !== undefined && TIER_RANK[m.isolation] < TIER_RANK[b.isolation])
    throw refused('isolation', `"${m.isolation}"`, `"${b.isolation}"`)
  if (asked.rootfs !== undefined && m.rootfs !== b.rootfs)
    throw refused('rootfs', `"${m.rootfs}"`, b.rootfs === undefined ? "host's root" : `"${b.rootfs}"`)
  if (asked.cgroup !== undefined && b.cgroup.mode === 'auto' && m.cgroup.mode === 'off')
    throw refused('cgroup.mode', '"off"', '"auto"')
  // What a run can only add to: the sandbox's and the run's together.
  // A sandbox that named no hide list hides cordon's home: a run's list is added to that, not put in its place.
  if (asked.hide !== undefined) out.hide = union(b.hide ?? defaultHide(), m.hide)
  if (asked.deny !== undefined) out.deny = union(b.deny, m.deny)
  if (asked.denySyscalls !== undefined) out.denySyscalls = union(b.denySyscalls, m.denySyscalls)
  if (asked.redact !== undefined) out.redact = union<string | RegExp>(base.redact, over.redact)
  return out
}
