// The decision for one connection: rules first (deny wins, a non-empty allow list is required), then the
// address the name resolves to, which is the one connected to (so a rebinding DNS answer cannot swap it).
// Hosts arrive parsed (see host.ts): the name judged here is exactly the name resolved.

import os from 'node:os'
import { lazy } from '../lazy.js'
import type { RefusalCode } from './events.js'
import { addressForms, embeddedIPv4, type Host, type IpHost, parseIp } from './host.js'
import type { NetworkPolicy } from './policy.js'
import { type HostRule, parseRule, ruleMatches } from './rules.js'

/**
 * The gate's answer: an address to connect to, a refusal, or a name the policy allows that did not
 * resolve to an address (`unresolvable`: not the policy's doing, and answered differently).
 */
export type Decision =
  | { allowed: true; address: string }
  | { allowed: false; code: RefusalCode | 'unresolvable'; reason: string }

/** Resolves a name to one address (getaddrinfo: /etc/hosts, then DNS). */
export type Lookup = (name: string) => Promise<string>

const rules = (entries: readonly string[]) =>
  entries.map(parseRule).filter((r): r is HostRule => typeof r !== 'string')

/**
 * Name lookups of one run at once. getaddrinfo runs on libuv's pool of 4 threads, which the host's file
 * system work shares: a sandbox resolving slow names must not hold them all. Beyond this, lookups wait
 * in order (each connection waits for at most one, and connections are capped: see proxy.ts).
 */
export const MAX_LOOKUPS = 2

/** The addresses of this host's interfaces, canonical (as IpHost.text). */
function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces()).flatMap((list) =>
    (list ?? []).flatMap((i) => parseIp(i.address)?.text ?? []),
  )
}

const dns = lazy<typeof import('node:dns/promises')>('node:dns/promises')
const systemLookup: Lookup = async (name) => (await dns().lookup(name)).address

export class NetworkGate {
  private readonly allow: HostRule[]
  private readonly deny: HostRule[]
  private lookups = 0
  private readonly waiting: (() => void)[] = []

  constructor(
    private readonly policy: NetworkPolicy,
    private readonly lookup: Lookup = systemLookup,
  ) {
    this.allow = rules(policy.allow)
    this.deny = rules(policy.deny)
  }

  /** The deny rule that matches this address in any of its spellings (the IPv4 one an IPv6 one carries). */
  private denied(address: string, bytes: Uint8Array | null, port: number): HostRule | undefined {
    const forms = [address, ...(bytes ? embeddedIPv4(bytes) : [])]
    return this.deny.find((r) => forms.some((form) => ruleMatches(r, form, port)))
  }

  private async resolve(name: string): Promise<string> {
    if (this.lookups >= MAX_LOOKUPS) await new Promise<void>((wake) => this.waiting.push(wake))
    this.lookups++
    try {
      return await this.lookup(name)
    } finally {
      this.lookups--
      this.waiting.shift()?.()
    }
  }

  async decide(host: Host, port: number): Promise<Decision> {
    const refuse = (code: RefusalCode | 'unresolvable', reason: string): Decision => ({
      allowed: false,
      code,
      reason,
    })
    const byRule = (r: HostRule) => `denied by ${r.host}${r.port ? `:${r.port}` : ''}`
    const bytes = host.kind === 'name' ? null : host.bytes
    const denied = this.denied(host.text, bytes, port)
    if (denied) return refuse('denied', byRule(denied))
    if (!this.allow.some((r) => ruleMatches(r, host.text, port)))
      return refuse('not-allowed', 'not on the allow list')
    let address: IpHost | null = host.kind === 'name' ? null : host
    if (!address) {
      let answer: string
      try {
        answer = await this.resolve(host.text)
      } catch (error) {
        return refuse('unresolvable', `cannot resolve: ${(error as NodeJS.ErrnoException).code ?? error}`)
      }
      // What the resolver answered is judged like what a sandbox names: a zone id or anything odd is refused.
      address = parseIp(answer)
      if (!address)
        return refuse('unresolvable', `resolved to ${JSON.stringify(answer.slice(0, 64))}, not an address`)
      const deniedAddress = this.denied(address.text, address.bytes, port)
      if (deniedAddress) return refuse('denied', `${address.text} is ${byRule(deniedAddress)}`)
    }
    // Each place the address leads to (both of Teredo's) needs what it needs: allowing one kind never
    // allows another.
    const forms = addressForms(address.bytes)
    const has = (kind: string) => forms.some((f) => f.kind === kind)
    if (has('loopback') && !this.policy.allowLoopback) {
      return refuse('loopback', `${address.text} is a loopback address (allowLoopback is off)`)
    }
    // The proxy runs on the host: its own addresses reach its services (bound to 0.0.0.0) as 127.0.0.1
    // does, from inside any firewall. Asked each time: interfaces come and go.
    // In every spelling: an IPv6 form of one of its IPv4 addresses (NAT64, 6to4...) leads back to it.
    const own = hostAddresses()
    const isOwn = (text: string) => own.includes(text)
    if ((isOwn(address.text) || forms.some((f) => isOwn(f.text))) && !this.policy.allowLoopback)
      return refuse('loopback', `${address.text} is an address of this host (allowLoopback is off)`)
    // The host's own link-local address is the host, which allowLoopback has just let through; only that
    // very form, not metadata beside it.
    if (forms.some((f) => f.kind === 'metadata' && !isOwn(f.text)) && !this.policy.allowMetadata) {
      return refuse('metadata', `${address.text} is a cloud metadata address (allowMetadata is off)`)
    }
    if (has('private') && !this.policy.allowPrivate) {
      return refuse('private', `${address.text} is a private or reserved address (allowPrivate is off)`)
    }
    return { allowed: true, address: address.text }
  }
}
