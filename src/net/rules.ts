// Network allowlist rules: `host` or `host:port` entries, `*.x.com` for subdomains only, deny wins; and
// which resolved addresses count as loopback or private (refused unless the policy allows them).
import net from 'node:net'

export interface HostRule {
  /** Lower-case host name or IP; a leading '*.' matches subdomains only. */
  host: string
  port: number | null
}

const HOST_RE = /^(?:\*\.)?(?:[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/

/** 'pypi.org', '*.pythonhosted.org', 'localhost:8080', '10.0.0.1:443', '[::1]:80' → a rule, or an error message. */
export function parseRule(entry: string): HostRule | string {
  const text = entry.trim().toLowerCase()
  const m = /^\[([0-9a-f:.]+)\](?::(\d+))?$/.exec(text) ?? /^([^:]+)(?::(\d+))?$/.exec(text)
  if (!m) return `"${entry}" is not host or host:port`
  const host = m[1]!
  const port = m[2] === undefined ? null : Number(m[2])
  if (port !== null && (port < 1 || port > 65535)) return `"${entry}" has a port outside 1-65535`
  if (!net.isIP(host) && !HOST_RE.test(host)) return `"${entry}" is not a host name`
  return { host, port }
}

export function normalizeHost(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
}

export function ruleMatches(rule: HostRule, host: string, port: number): boolean {
  if (rule.port !== null && rule.port !== port) return false
  if (rule.host.startsWith('*.'))
    return host.endsWith(rule.host.slice(1)) && host.length > rule.host.length - 1
  return host === rule.host
}

export type AddressKind = 'loopback' | 'private' | 'public'

function ipv4Kind(ip: string): AddressKind {
  const [a = 0, b = 0] = ip.split('.').map(Number)
  if (a === 127) return 'loopback'
  // unspecified, private, CGNAT, link-local (cloud metadata 169.254.169.254), benchmarking, multicast and up
  if (a === 0 || a === 10 || (a === 100 && b >= 64 && b < 128) || (a === 169 && b === 254)) return 'private'
  if ((a === 172 && b >= 16 && b < 32) || (a === 192 && b === 168) || (a === 198 && (b === 18 || b === 19))) {
    return 'private'
  }
  if (a >= 224) return 'private'
  return 'public'
}

/** What kind of address this is; IPv4-mapped IPv6 is judged as the IPv4 it carries. */
export function addressKind(ip: string): AddressKind {
  if (net.isIPv4(ip)) return ipv4Kind(ip)
  const v6 = ip.toLowerCase()
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v6)
  if (mapped) return ipv4Kind(mapped[1]!)
  if (v6 === '::1') return 'loopback'
  // unspecified, unique-local (fc00::/7, includes AWS fd00:ec2::254), link-local, multicast
  if (v6 === '::' || /^f[cd]/.test(v6) || /^fe[89ab]/.test(v6) || v6.startsWith('ff')) return 'private'
  return 'public'
}
