// Request bodies held at once. A body is held several times over while it is read, parsed and written (its
// bytes, the string, the parsed object, decoded files: ~4-5x for an 8 MiB run with files), and the body
// limit bounds one request, not how many arrive together: a few hundred clients sending 8 MiB each would
// take gigabytes. Each body takes its declared length (or the largest a body may be, when it declares none)
// from one budget before it is read, and gives it back when its request is answered.
//
// One owner (a key) may hold only a share of it: a body is held for as long as its client takes to send
// it (up to the server's request timeout), so without a share one key sending a few bodies slowly, or
// sending none of the length it declared, would leave no room for anyone else's.

/** A budget of bytes; `take` refuses what would go past it (one body alone is always let through). */
export interface ByteBudget {
  take(bytes: number, owner?: string): boolean
  /** Whether take() would take `bytes` now (takes nothing). */
  fits(bytes: number, owner?: string): boolean
  /** Takes `bytes` past the budget if need be (what must be held anyway); always true. */
  force(bytes: number, owner?: string): true
  give(bytes: number, owner?: string): void
  readonly held: number
}

export function byteBudget(max: number, maxPerOwner = max): ByteBudget {
  let held = 0
  const byOwner = new Map<string, number>()
  // An idle server takes any one body the body limit allows, so a budget below it cannot refuse all;
  // likewise an owner holding nothing may send one body past its share.
  const fits = (bytes: number, owner?: string) => {
    if (held > 0 && held + bytes > max) return false
    const mine = owner === undefined ? 0 : (byOwner.get(owner) ?? 0)
    return !(mine > 0 && mine + bytes > maxPerOwner)
  }
  return {
    fits,
    take(bytes, owner) {
      if (!fits(bytes, owner)) return false
      const mine = owner === undefined ? 0 : (byOwner.get(owner) ?? 0)
      held += bytes
      if (owner !== undefined) byOwner.set(owner, mine + bytes)
      return true
    },
    force(bytes, owner) {
      held += bytes
      if (owner !== undefined) byOwner.set(owner, (byOwner.get(owner) ?? 0) + bytes)
      return true
    },
    give(bytes, owner) {
      held = Math.max(0, held - bytes)
      if (owner === undefined) return
      const left = (byOwner.get(owner) ?? 0) - bytes
      if (left > 0) byOwner.set(owner, left)
      else byOwner.delete(owner)
    },
    get held() {
      return held
    },
  }
}

/** What a request's body takes from the budget: its Content-Length, or `fallback` when it has none. */
export function bodyCost(contentLength: string | undefined, fallback: number): number {
  if (contentLength === undefined || !/^\d+$/.test(contentLength.trim())) return fallback
  return Math.min(Number(contentLength.trim()), fallback)
}
