// The decision for one connection: rules first (deny wins, a non-empty allow list is required), then the
// address the name resolves to, which is the one connected to (so a rebinding DNS answer cannot swap it).
import { lookup } from 'node:dns/promises'
import net from 'node:net'
import { addressKind, type HostRule, normalizeHost, parseRule, ruleMatches } from './rules.js'

export interface NetworkPolicy {
  allow: string[]
  deny: string[]
  allowLoopback: boolean
  allowPrivate: boolean
}

export interface NetworkEvent {
  host: string
  port: number
  allowed: boolean
  /** Why it was refused, or the address it was allowed to. */
  reason: string
}

export type Decision = { allowed: true; address: string } | { allowed: false; reason: string }

const rules = (entries: readonly string[]) =>
  entries.map(parseRule).filter((r): r is HostRule => typeof r !== 'string')

export class NetworkGate {
  private readonly allow: HostRule[]
  private readonly deny: HostRule[]

  constructor(private readonly policy: NetworkPolicy) {
    this.allow = rules(policy.allow)
    this.deny = rules(policy.deny)
  }

  async decide(rawHost: string, port: number): Promise<Decision> {
    const host = normalizeHost(rawHost)
    const denied = this.deny.find((r) => ruleMatches(r, host, port))
    if (denied)
      return { allowed: false, reason: `denied by ${denied.host}${denied.port ? `:${denied.port}` : ''}` }
    if (!this.allow.some((r) => ruleMatches(r, host, port)))
      return { allowed: false, reason: 'not on the allow list' }
    let address = host
    if (!net.isIP(host)) {
      try {
        address = (await lookup(host)).address
      } catch (error) {
        return { allowed: false, reason: `cannot resolve: ${(error as NodeJS.ErrnoException).code ?? error}` }
      }
    }
    const kind = addressKind(address)
    if (kind === 'loopback' && !this.policy.allowLoopback) {
      return { allowed: false, reason: `${address} is a loopback address (allowLoopback is off)` }
    }
    if (kind === 'private' && !this.policy.allowPrivate) {
      return {
        allowed: false,
        reason: `${address} is a private, link-local or metadata address (allowPrivate is off)`,
      }
    }
    return { allowed: true, address }
  }
}
