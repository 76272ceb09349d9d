// Request bodies held at once. A body is held several times over while it is read, parsed and written (its
// bytes, the string, the parsed object, decoded files: ~4-5x for an 8 MiB run with files), and the body
// limit bounds one request, not how many arrive together: a few hundred clients sending 8 MiB each would
// take gigabytes. Each body takes its declared length (or the largest a body may be, when it declares none)
// from one budget before it is read, and gives it back when its request is answered.

/** A budget of bytes; `take` refuses what would go past it (one body alone is always let through). */
export interface ByteBudget {
  take(bytes: number): boolean
  give(bytes: number): void
  readonly held: number
}

export function byteBudget(max: number): ByteBudget {
  let held = 0
  return {
    take(bytes) {
      // An idle server takes any one body the body limit allows, so a budget below it cannot refuse all.
      if (held > 0 && held + bytes > max) return false
      held += bytes
      return true
    },
    give(bytes) {
      held = Math.max(0, held - bytes)
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
