// The Host allowlist of `cordon serve`, against DNS rebinding: a page of evil.example whose name the
// attacker re-resolves to 127.0.0.1 reaches the server from the victim's browser, as its own origin, with
// `Host: evil.example`. The browser sends the name the page was loaded from, so the Host tells it: an IP
// literal, `localhost` or `*.localhost` (which browsers resolve to loopback themselves, and no one can
// register) cannot be the attacker's name; any other name must be the operator's (`--allowed-host`).
import { isIPv4, isIPv6 } from 'node:net'
import * as z from 'zod'

/** The entry that turns the check off (a proxy in front checks the Host, say). */
export const ANY_HOST = 'any'

const LABEL = '[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?'
const ENTRY = new RegExp(`^\\.?${LABEL}(?:\\.${LABEL})*$`)

/** A Host's name as compared: lowercased, without one trailing dot (`cordon.example.` is the same host). */
const normal = (name: string) => {
  const lower = name.toLowerCase()
  return lower.endsWith('.') ? lower.slice(0, -1) : lower
}

/**
 * One `--allowed-host` entry: a host name (`cordon.example`, that name only), `.corp.example` for that name
 * and every subdomain of it, or `any`. Without a port: a name is allowed on any port.
 */
export const allowedHostSchema = z.string().transform((value, ctx) => {
  const v = value.toLowerCase() === ANY_HOST ? ANY_HOST : normal(value)
  if (v === ANY_HOST || ENTRY.test(v)) return v
  const message = v.startsWith('*.')
    ? `"${value}": write ${v.slice(1)} for ${v.slice(2)} and its subdomains`
    : `"${value}": must be a host name (cordon.example, without a port), .corp.example for it and its subdomains, or any`
  ctx.addIssue({ code: 'custom', message })
  return z.NEVER
})

export const allowedHostsSchema = z.array(allowedHostSchema)

/**
 * The name a Host header names, without its port: `{ ip: true }` for an IP literal, null for what is not a
 * Host (a bare IPv6 address, a port that is not a number, spaces).
 */
function hostName(header: string): { ip: boolean; name: string } | null {
  if (header.startsWith('[')) {
    const end = header.indexOf(']')
    if (end < 0 || !/^(?::\d*)?$/.test(header.slice(end + 1))) return null
    const inner = header.slice(1, end)
    return isIPv6(inner) ? { ip: true, name: inner } : null
  }
  // A name's characters only: two Host headers come joined ("evil.example, x.localhost"), which must not
  // pass for the last name in it.
  const m = /^([a-z0-9_.-]+)(?::\d*)?$/i.exec(header)
  if (!m) return null
  const name = normal(m[1] as string)
  return { ip: isIPv4(name), name }
}

/**
 * Whether a request's Host header may be served, given the parsed allowlist. No Host at all passes: only
 * HTTP/1.0 may omit it (Node answers an HTTP/1.1 request without one 400), and a browser always sends it.
 */
export function hostChecker(allowed: readonly string[]): (header: string | undefined) => boolean {
  if (allowed.includes(ANY_HOST)) return () => true
  const exact = new Set(allowed.filter((a) => !a.startsWith('.')))
  const suffixes = allowed.filter((a) => a.startsWith('.'))
  return (header) => {
    if (header === undefined || header === '') return true
    const host = hostName(header)
    if (!host) return false
    if (host.ip) return true
    const { name } = host
    if (name === 'localhost' || name.endsWith('.localhost')) return true
    if (exact.has(name)) return true
    return suffixes.some((s) => name === s.slice(1) || name.endsWith(s))
  }
}
