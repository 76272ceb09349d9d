// The one parser for every host a sandbox names (HTTP CONNECT, absolute-URI requests, SOCKS5) and for the
// hosts of allow/deny rules, and the classification of addresses on their bytes. A host is exactly one of
// a canonical dotted-quad IPv4, an IPv6 literal (every spelling, parsed to its 16 bytes), or a DNS name
// of letters, digits, hyphens and underscores. Anything else is refused: what is judged against the rules
// is byte-for-byte what is resolved or connected to, so no spelling can be read one way by cordon and
// another way by the resolver (a NUL that ends a C string, `127.1` that inet_aton reads as an address).

export type Host =
  /** A v4-mapped IPv6 address (::ffff:a.b.c.d) is this IPv4 address: one address, one spelling. */
  | { kind: 'ipv4'; text: string; bytes: Uint8Array }
  | { kind: 'ipv6'; text: string; bytes: Uint8Array }
  /** Lower case, without a trailing dot. */
  | { kind: 'name'; text: string }

export type IpHost = Exclude<Host, { kind: 'name' }>

/** Longest text accepted at all: a DNS name is at most 253 characters (254 with its trailing dot). */
const MAX_HOST_TEXT = 254
const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)'
/** Four decimal octets without leading zeros: the only IPv4 spelling accepted. */
const IPV4_RE = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`)
/** A label: letters, digits, underscores, hyphens inside; 1-63 characters. */
const LABEL_RE = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/
/**
 * A last label that getaddrinfo's inet_aton (or a URL parser) reads as a number, making the whole name an
 * address: `127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`, `1.2.3.0x4`.
 */
const NUMERIC_LABEL_RE = /^(?:\d+|0x[0-9a-f]*)$/

export function parseIPv4(text: string): Uint8Array | null {
  if (!IPV4_RE.test(text)) return null
  return Uint8Array.from(text.split('.').map(Number))
}

/** Every RFC 4291 spelling (`::`, leading zeros, upper case, a dotted quad in the last 32 bits); no zone ids. */
export function parseIPv6(text: string): Uint8Array | null {
  if (text.length > 45 || !/^[0-9A-Fa-f:.]+$/.test(text)) return null
  let body = text
  let v4: Uint8Array | null = null
  if (text.includes('.')) {
    const at = text.lastIndexOf(':')
    v4 = parseIPv4(text.slice(at + 1))
    if (at < 0 || !v4) return null
    body = `${text.slice(0, at + 1)}0:0` // two placeholder groups, filled from v4 below
  }
  const halves = body.split('::')
  if (halves.length > 2) return null
  const groups = (half: string) => (half === '' ? [] : half.split(':'))
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  if (![...head, ...tail].every((g) => /^[0-9A-Fa-f]{1,4}$/.test(g))) return null
  const count = head.length + tail.length
  if (halves.length === 2 ? count > 7 : count !== 8) return null
  const words = [...head, ...Array<string>(8 - count).fill('0'), ...tail].map((g) => Number.parseInt(g, 16))
  const bytes = new Uint8Array(16)
  words.forEach((w, i) => {
    bytes[2 * i] = w >> 8
    bytes[2 * i + 1] = w & 0xff
  })
  if (v4) bytes.set(v4, 12)
  return bytes
}

const isMapped = (b: Uint8Array) =>
  b.length === 16 && b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff

/** RFC 5952 text: lower case, no leading zeros, the longest run (2+ groups, first on a tie) of zeros as `::`. */
export function formatIPv6(bytes: Uint8Array): string {
  const words = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!)
  let best = { at: -1, len: 1 }
  for (let i = 0; i < 8; ) {
    let j = i
    while (j < 8 && words[j] === 0) j++
    if (j - i > best.len) best = { at: i, len: j - i }
    i = j === i ? i + 1 : j
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(':')
  if (best.at < 0) return hex(words)
  return `${hex(words.slice(0, best.at))}::${hex(words.slice(best.at + best.len))}`
}

/** The host for 4 or 16 address bytes: a v4-mapped IPv6 address is its IPv4 address. */
export function ipFromBytes(bytes: Uint8Array): IpHost {
  if (bytes.length === 4) return { kind: 'ipv4', text: bytes.join('.'), bytes: Uint8Array.from(bytes) }
  if (isMapped(bytes)) return ipFromBytes(bytes.subarray(12))
  return { kind: 'ipv6', text: formatIPv6(bytes), bytes: Uint8Array.from(bytes) }
}

/** An IP literal (canonical IPv4 or any IPv6 spelling, unbracketed), or null. */
export function parseIp(text: string): IpHost | null {
  const bytes = parseIPv4(text) ?? parseIPv6(text)
  return bytes && ipFromBytes(bytes)
}

/** A DNS name: ASCII LDH (and `_`) labels of 1-63, at most 253 in all, one trailing dot dropped, lower-cased. */
export function parseName(text: string): string | null {
  if (text.length > MAX_HOST_TEXT) return null
  const name = (text.endsWith('.') ? text.slice(0, -1) : text).toLowerCase()
  if (name.length === 0 || name.length > 253) return null
  const labels = name.split('.')
  if (!labels.every((l) => LABEL_RE.test(l))) return null
  return NUMERIC_LABEL_RE.test(labels.at(-1)!) ? null : name
}

/** A host as a sandbox names it (no brackets, no port): an IP literal, a name, or null for anything else. */
export function parseHost(text: string): Host | null {
  if (text.length > MAX_HOST_TEXT) return null
  const ip = parseIp(text)
  if (ip) return ip
  const name = parseName(text)
  return name === null ? null : { kind: 'name', text: name }
}

/** A URI host (RFC 3986): an IPv6 literal in brackets, else a host as `parseHost`. */
export function parseUriHost(text: string): Host | null {
  if (!text.startsWith('[')) return parseHost(text)
  if (!text.endsWith(']')) return null
  const bytes = parseIPv6(text.slice(1, -1))
  return bytes && ipFromBytes(bytes)
}

/** How many characters of a refused host an event shows. */
const SHOWN = 253

/**
 * A host as the sandbox sent it, for an event: every character outside printable ASCII (and the
 * backslash) escaped JSON-style (`\u0000`), cut to a sane length.
 */
export function showHost(raw: string): string {
  let out = ''
  for (const c of raw) {
    const code = c.codePointAt(0)!
    const shown =
      c === '\\'
        ? '\\\\'
        : code >= 0x20 && code < 0x7f
          ? c
          : Array.from(
              { length: c.length },
              (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`,
            ).join('')
    if (out.length + shown.length > SHOWN) return `${out}...`
    out += shown
  }
  return out
}

/** What an address reaches, worst first: the host itself; a cloud's metadata endpoint (the host's
 * credentials); a private or reserved range; the public internet. */
export type AddressKind = 'loopback' | 'metadata' | 'private' | 'public'

type Judge = AddressKind | ((bytes: Uint8Array) => AddressKind)
interface Range {
  prefix: number[]
  bits: number
  judge: Judge
}

const KINDS_WORST_FIRST: readonly AddressKind[] = ['loopback', 'metadata', 'private', 'public']
const worst = (...kinds: AddressKind[]): AddressKind =>
  KINDS_WORST_FIRST.find((kind) => kinds.includes(kind)) ?? 'public'

/** Special IPv4 ranges, most specific first; everything else is public. */
export const IPV4_RANGES: readonly Range[] = [
  // Connecting to 0.0.0.0 reaches the host itself.
  { prefix: [0, 0, 0, 0], bits: 32, judge: 'loopback' },
  { prefix: [0], bits: 8, judge: 'private' },
  { prefix: [10], bits: 8, judge: 'private' },
  { prefix: [100, 100, 100, 200], bits: 32, judge: 'metadata' }, // Alibaba Cloud's, in CGNAT space
  { prefix: [100, 64], bits: 10, judge: 'private' }, // carrier-grade NAT
  { prefix: [127], bits: 8, judge: 'loopback' },
  // Azure's WireServer: public by its number, yet every Azure VM's platform endpoint (goal state,
  // extension settings), which the agent's firewall opens to root, as the proxy is.
  { prefix: [168, 63, 129, 16], bits: 32, judge: 'metadata' },
  // Link-local: AWS, GCP, Azure, OpenStack and DigitalOcean metadata at 169.254.169.254, ECS task
  // credentials at 169.254.170.2, AWS's DNS and time servers. Nothing else a sandbox needs lives here.
  { prefix: [169, 254], bits: 16, judge: 'metadata' },
  { prefix: [172, 16], bits: 12, judge: 'private' },
  { prefix: [192, 0, 0, 192], bits: 32, judge: 'metadata' }, // Oracle Cloud's
  { prefix: [192, 0, 0], bits: 24, judge: 'private' }, // IETF protocol assignments
  { prefix: [192, 0, 2], bits: 24, judge: 'private' }, // TEST-NET-1
  { prefix: [192, 88, 99], bits: 24, judge: 'private' }, // 6to4 relay anycast
  { prefix: [192, 168], bits: 16, judge: 'private' },
  { prefix: [198, 18], bits: 15, judge: 'private' }, // benchmarking
  { prefix: [198, 51, 100], bits: 24, judge: 'private' }, // TEST-NET-2
  { prefix: [203, 0, 113], bits: 24, judge: 'private' }, // TEST-NET-3
  { prefix: [224], bits: 4, judge: 'private' }, // multicast
  { prefix: [240], bits: 4, judge: 'private' }, // reserved, broadcast
]

const v4At = (from: number) => (b: Uint8Array) => ipv4Kind(b.subarray(from, from + 4))

const UNSPECIFIED: Range = { prefix: [], bits: 128, judge: 'loopback' } // reaches the host, like 0.0.0.0
const LOOPBACK6: Range = {
  prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
  bits: 128,
  judge: 'loopback',
}
const MAPPED: Range = { prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], bits: 96, judge: v4At(12) }
const COMPATIBLE: Range = { prefix: [], bits: 96, judge: v4At(12) } // deprecated, still routed by some stacks
/** IPv4-translated (SIIT, RFC 2765): what a stateless translator turns into the IPv4 address. */
const TRANSLATED: Range = { prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0], bits: 96, judge: v4At(12) }
const NAT64: Range = { prefix: [0, 0x64, 0xff, 0x9b], bits: 96, judge: v4At(12) }
const SIX_TO_FOUR: Range = { prefix: [0x20, 0x02], bits: 16, judge: v4At(2) }
/** Teredo: the server's IPv4 address, and the client's with its bits inverted. */
const TEREDO: Range = {
  prefix: [0x20, 0x01, 0, 0],
  bits: 32,
  judge: (b) => worst(ipv4Kind(b.subarray(4, 8)), ipv4Kind(b.subarray(12, 16).map((x) => x ^ 0xff))),
}

/** Special IPv6 ranges, most specific first; an address embedding an IPv4 one is judged as that one. */
export const IPV6_RANGES: readonly Range[] = [
  UNSPECIFIED,
  LOOPBACK6,
  MAPPED,
  COMPATIBLE,
  TRANSLATED,
  NAT64,
  { prefix: [0, 0x64, 0xff, 0x9b, 0, 1], bits: 48, judge: 'private' }, // local-use NAT64
  { prefix: [], bits: 8, judge: 'private' }, // the rest of ::/8, reserved
  { prefix: [1, 0], bits: 64, judge: 'private' }, // discard-only
  TEREDO,
  { prefix: [0x20, 0x01, 0], bits: 23, judge: 'private' }, // IETF protocol assignments
  { prefix: [0x20, 0x01, 0x0d, 0xb8], bits: 32, judge: 'private' }, // documentation
  SIX_TO_FOUR,
  { prefix: [0x3f, 0xff], bits: 20, judge: 'private' }, // documentation
  // AWS's metadata over IPv6 (Nitro instances).
  { prefix: [0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54], bits: 128, judge: 'metadata' },
  { prefix: [0xfc], bits: 7, judge: 'private' }, // unique local
  { prefix: [0xfe, 0x80], bits: 10, judge: 'metadata' }, // link-local, as 169.254/16
  { prefix: [0xfe, 0xc0], bits: 10, judge: 'private' }, // site-local (deprecated)
  { prefix: [0xff], bits: 8, judge: 'private' }, // multicast
]

function inRange(bytes: Uint8Array, r: Range): boolean {
  for (let bit = 0; bit < r.bits; bit += 8) {
    const mask = r.bits - bit >= 8 ? 0xff : (0xff << (8 - (r.bits - bit))) & 0xff
    if (((bytes[bit / 8]! ^ (r.prefix[bit / 8] ?? 0)) & mask) !== 0) return false
  }
  return true
}

function judged(bytes: Uint8Array, ranges: readonly Range[]): AddressKind {
  const r = ranges.find((range) => inRange(bytes, range))
  if (!r) return 'public'
  return typeof r.judge === 'string' ? r.judge : r.judge(bytes)
}

const ipv4Kind = (bytes: Uint8Array) => judged(bytes, IPV4_RANGES)

/** What kind of address 4 or 16 bytes are; an IPv6 address that carries an IPv4 one is judged by it. */
export function addressKind(bytes: Uint8Array): AddressKind {
  return judged(bytes, bytes.length === 4 ? IPV4_RANGES : IPV6_RANGES)
}

/**
 * The IPv4 addresses an IPv6 address leads to (v4-mapped, v4-compatible, IPv4-translated, NAT64, 6to4,
 * Teredo), as text: a deny of an IPv4 address, and the host's own addresses, hold for them too.
 */
export function embeddedIPv4(bytes: Uint8Array): string[] {
  if (bytes.length !== 16) return []
  const at = (from: number, flip = 0) => Array.from(bytes.subarray(from, from + 4), (x) => x ^ flip).join('.')
  const is = (r: Range) => inRange(bytes, r)
  if (is(UNSPECIFIED) || is(LOOPBACK6)) return []
  if (is(MAPPED) || is(COMPATIBLE) || is(TRANSLATED) || is(NAT64)) return [at(12)]
  if (is(TEREDO)) return [at(4), at(12, 0xff)]
  if (is(SIX_TO_FOUR)) return [at(2)]
  return []
}

/**
 * Every address `bytes` leads to, each with its own kind: the IPv4 addresses an IPv6 one carries (see
 * embeddedIPv4), or the address itself. Teredo leads to two, and one kind (the worst) does not say what
 * each needs: loopback outranks metadata, yet allowLoopback does not allow metadata.
 */
export function addressForms(bytes: Uint8Array): { text: string; kind: AddressKind }[] {
  const v4 = embeddedIPv4(bytes)
  if (v4.length === 0) return [{ text: ipFromBytes(bytes).text, kind: addressKind(bytes) }]
  return v4.map((text) => ({ text, kind: addressKind(parseIPv4(text)!) }))
}

/**
 * What an IP literal reaches: canonical IPv4 or any IPv6 spelling (bracketed or not; a v4-mapped one as its
 * IPv4 address); null for anything else, a name included. For a face that must keep its own outgoing
 * connections (a service's webhooks) off loopback and private ranges, judged as the proxies judge them.
 */
export function classifyAddress(text: string): AddressKind | null {
  const host = parseUriHost(text)
  return host && host.kind !== 'name' ? addressKind(host.bytes) : null
}
