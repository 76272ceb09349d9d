// Network allowlist rules: `host` or `host:port` entries, `*.x.com` for subdomains only, deny wins. A
// rule's host goes through the same parser as the hosts a sandbox names, so both are compared in one
// canonical spelling (an IPv6 rule in any spelling, a v4-mapped one as its IPv4 address).
import { type Host, parseName, parseUriHost } from './host.js'

export interface HostRule {
  /** A canonical host (see parseHost); a leading '*.' matches subdomains only. */
  host: string
  port: number | null
}

/** 'pypi.org', '*.pythonhosted.org', 'localhost:8080', '10.0.0.1:443', '[::1]:80' → a rule, or an error message. */
export function parseRule(entry: string): HostRule | string {
  const text = entry.trim()
  const m = /^(\[[^\]]*\])(?::(\d{1,5}))?$/.exec(text) ?? /^([^:[\]]+)(?::(\d{1,5}))?$/.exec(text)
  if (!m) return `"${entry}" is not host or host:port`
  const port = m[2] === undefined ? null : Number(m[2])
  if (port !== null && (port < 1 || port > 65535)) return `"${entry}" has a port outside 1-65535`
  const given = m[1]!
  if (given.startsWith('*.')) {
    const name = parseName(given.slice(2))
    return name === null ? `"${entry}" is not a host name` : { host: `*.${name}`, port }
  }
  const host = parseUriHost(given)
  // A bare IPv6 address cannot carry a port: `[::1]` or `[::1]:80`.
  if (!host || (host.kind === 'ipv6' && !given.startsWith('['))) return `"${entry}" is not a host name`
  return { host: host.text, port }
}

export function ruleMatches(rule: HostRule, host: string, port: number): boolean {
  if (rule.port !== null && rule.port !== port) return false
  if (rule.host.startsWith('*.'))
    return host.endsWith(rule.host.slice(1)) && host.length > rule.host.length - 1
  return host === rule.host
}

/** The first rule that matches a parsed host on this port. */
export function matching(rules: readonly HostRule[], host: Host, port: number): HostRule | undefined {
  return rules.find((r) => ruleMatches(r, host.text, port))
}
