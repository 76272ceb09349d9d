// Whether one allowlist entry reaches only what another does: how a run's or a key's allowlist is held
// within its ceiling (a sandbox's allowlist, a key's `ceilings.network`).

/** `host`, `host:port`, `[v6]:port`, `*.x.com` as host (lower case, no trailing dot) and port (or null). */
function splitEntry(entry: string): { host: string; port: string | null } {
  const text = entry.trim().toLowerCase()
  const m = /^(\[[^\]]*\]|[^:]+)(?::(\d+))?$/.exec(text)
  return { host: (m?.[1] ?? text).replace(/\.$/, ''), port: m?.[2] ?? null }
}

/**
 * Whether every connection `entry` allows is one `bound` allows: the same host (a `*.d` bound: any name
 * under d, or `*.e` with e under or equal to d), and the bound's port if it names one. Spellings are
 * compared as written (lower case): an IPv6 literal spelt two ways is refused, never let through.
 */
export function allowEntryWithin(entry: string, bound: string): boolean {
  const e = splitEntry(entry)
  const b = splitEntry(bound)
  if (b.port !== null && e.port !== b.port) return false
  if (b.host.startsWith('*.')) {
    const domain = b.host.slice(2)
    const name = e.host.startsWith('*.') ? e.host.slice(2) : e.host
    return e.host.startsWith('*.')
      ? name === domain || name.endsWith(`.${domain}`)
      : name.endsWith(`.${domain}`)
  }
  return e.host === b.host
}
