// The host and port an HTTP request names, read from its request target as sent: CONNECT's authority
// form, an absolute `http://` URI, or (for a request Node's parser refused) its request line's bytes.
// Nothing is percent-decoded, IDNA-mapped or otherwise canonicalised here: the one parser of hosts
// (host.ts) reads the text exactly as the sandbox sent it, through either proxy.

export interface Target {
  /** The host as sent (an IPv6 literal with its brackets); the whole authority when it does not split. */
  raw: string
  /** The port, or null when the authority has none that is valid (1-65535). */
  port: number | null
  /** Whether the port was written out. */
  explicit: boolean
}

/** `host[:port]` (an IPv6 host in brackets), with `fallback` for a missing port. */
export function splitAuthority(authority: string, fallback: number): Target {
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d{1,5}))?$/.exec(authority)
  if (!m) return { raw: authority, port: null, explicit: false }
  const port = m[2] === undefined ? fallback : Number(m[2])
  return { raw: m[1]!, port: port >= 1 && port <= 65535 ? port : null, explicit: m[2] !== undefined }
}

/**
 * An absolute URI's scheme (lower case), authority and path with query (never empty; the fragment dropped),
 * or null for any other request target (origin form `/x`, `*`).
 */
export function splitAbsolute(target: string): { scheme: string; authority: string; path: string } | null {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^#]*)/.exec(target)
  if (!m) return null
  const path = m[3]!
  return { scheme: m[1]!.toLowerCase(), authority: m[2]!, path: path.startsWith('/') ? path : `/${path}` }
}

/** The host and port a request names: CONNECT's authority, else an absolute URI's (port 80 by default). */
export function targetOf(method: string, target: string): Target | null {
  if (method.toUpperCase() === 'CONNECT') return splitAuthority(target, 443)
  const uri = splitAbsolute(target)
  return uri ? splitAuthority(uri.authority, uri.scheme === 'https' ? 443 : 80) : null
}

/**
 * The request line around byte `at` of `packet` (where the parser stopped), when that line is one: its
 * method and its target as sent (everything between the method and a trailing ` HTTP/x.y`, so a target
 * with a space in it stays whole). Null when the line is a header, or begins before the packet.
 */
export function requestLineAt(packet: Buffer, at: number): { method: string; target: string } | null {
  const text = packet.toString('latin1')
  const stop = Math.min(Math.max(at, 0), text.length)
  const start = text.lastIndexOf('\n', stop - 1) + 1
  const eol = text.indexOf('\n', start)
  const line = text.slice(start, eol < 0 ? text.length : eol).replace(/\r$/, '')
  const m = /^([A-Za-z]{1,20}) (.*?)(?: HTTP\/\d\.\d)?$/s.exec(line)
  return m ? { method: m[1]!, target: m[2]! } : null
}
