// What a key may ask for (`GET /v1/keys/me`): each limit's default and most, within the key's ceilings and
// the server's, the network modes (and the allowlist they are bounded by), the pinned tier and the root
// filesystems. A form (the dashboard's) offers exactly this, rather than what every key is refused (a key
// without a network ceiling gets `none`, and was offered `host`). ceilings.ts enforces the same bounds.
import { policySchema } from '../index.js'
import type { ServerLimitCeilings } from './ceilings.js'
import { keyCeilings, LIMIT_NAMES } from './key-schema.js'
import type { KeyRecord } from './types.js'

const DEFAULT_LIMITS = policySchema.shape.limits.parse({}) as Record<string, number>

export interface LimitAllowance {
  /** What a request that leaves it unset runs with: min(the library's default, the ceiling). */
  default: number
  /** The most a request may ask; null: no ceiling. */
  max: number | null
}

export interface NetworkAllowance {
  /** The modes a request may ask: always `none`; `allow` (an allowlist) and `host` when granted. */
  modes: ('none' | 'allow' | 'host')[]
  /**
   * Whom an allowlist may name: `any` (every host, loopback and private ranges included: a `host`
   * ceiling), `public` (public hosts only: a list of modes), or the ceiling's own allowlist, which a
   * request's must stay within (its `deny` is added to every request's).
   */
  allow:
    | 'any'
    | 'public'
    | {
        allow: string[]
        deny: string[]
        allowLoopback: boolean
        allowPrivate: boolean
        allowMetadata: boolean
      }
    | null
}

export interface Allowance {
  limits: Record<string, LimitAllowance>
  network: NetworkAllowance
  /** The tier every run of the key takes; null: the request's. */
  isolation: string | null
  /** The only root filesystems a request may name; null: any. */
  rootfs: string[] | null
}

export function keyAllowance(key: KeyRecord, server: ServerLimitCeilings = {}): Allowance {
  const ceilings = keyCeilings(key)
  const limits: Record<string, LimitAllowance> = {}
  for (const name of LIMIT_NAMES) {
    const mine = ceilings.limits?.[name]
    const theirs = server[name]
    const max = mine === undefined ? (theirs ?? null) : theirs === undefined ? mine : Math.min(mine, theirs)
    const fallback = DEFAULT_LIMITS[name] as number
    limits[name] = { default: max === null ? fallback : Math.min(fallback, max), max }
  }
  const given = ceilings.network ?? 'none'
  let network: NetworkAllowance
  if (given === 'none') network = { modes: ['none'], allow: null }
  else if (given === 'host') network = { modes: ['none', 'allow', 'host'], allow: 'any' }
  else if (Array.isArray(given)) {
    const modes = (['none', 'allow', 'host'] as const).filter((m) => m === 'none' || given.includes(m))
    network = { modes, allow: modes.includes('allow') ? 'public' : null }
  } else network = { modes: ['none', 'allow'], allow: given }
  return {
    limits,
    network,
    isolation: ceilings.isolation ?? null,
    rootfs: ceilings.rootfs ?? null,
  }
}
