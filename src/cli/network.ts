// The one line `cordon run` prints on stderr when a program failed and its connections did not all go
// through: so a failure the network policy caused reads as the policy's, not as a broken network, and an
// allowed name that did not resolve reads otherwise than a forbidden one.
import type { NetworkEvent } from '../index.js'

/** Connections named in the line, at most; the rest are counted. */
const SHOWN = 3

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`

/** `host:port (code)`, an IPv6 literal sent bare in brackets; a request that named no host by its code. */
function describe(e: NetworkEvent): string {
  if (!e.host) return e.code
  const host = e.host.includes(':') && !e.host.startsWith('[') ? `[${e.host}]` : e.host
  return `${host}:${e.port} (${e.code})`
}

function part(events: NetworkEvent[], what: string): string {
  const names = [...new Set(events.map(describe))]
  const more = names.length - SHOWN
  const list = names.slice(0, SHOWN).join(', ')
  return `${what} ${plural(events.length, 'connection')}: ${list}${more > 0 ? `, and ${more} more` : ''}`
}

/**
 * The summary line (with its newline), or '' when every connection recorded went through. `dropped`:
 * connections past those recorded (networkDropped), of which nothing is known but their number.
 */
export function networkSummary(events: readonly NetworkEvent[], dropped = 0): string {
  const refused = events.filter((e) => !e.allowed)
  const failed = events.filter((e) => e.allowed && e.code !== 'connected')
  const parts = [
    ...(refused.length > 0 ? [part(refused, 'the network policy refused')] : []),
    ...(failed.length > 0 ? [part(failed, 'allowed but failed')] : []),
  ]
  if (parts.length === 0) return ''
  if (dropped > 0) parts.push(`${plural(dropped, 'more connection')} not recorded`)
  return `cordon: ${parts.join('; ')} (network in --json)\n`
}
