// The runs' feed: each change of a run's state (made, started, finished, removed) as the run's summary,
// for a list to follow live rather than poll (`GET /v1/runs/events`; a list polled every 2 s read every
// run's whole output each time, 49.7 MB in 10 s with one 4 MB run).
//
// In process: the service tells the feed each state event it publishes (queued, started, end,
// interrupted) and each run it removes; the feed reads the run's summary once (the store has its new
// state by then) and keeps the latest items in a ring bounded by count and bytes, numbered in this
// process's order. A client resumes after the id of the last item it saw (`<boot>-<n>`): the items after
// it that it may see are replayed from the ring. When they are not all there any more (it was away too
// long, or the server restarted, which begins another boot), it is told to read the list again (a `sync`)
// instead: the list is the truth, the feed only keeps it fresh.
import { randomBytes } from 'node:crypto'
import type { KeyRecord, RunEvent, RunRecord } from './types.js'
import { runView, ServiceError } from './types.js'

export type FeedItemType = 'run' | 'removed'

export interface FeedItem {
  /** Its place in this process's feed: 1, 2, … with no gap. */
  n: number
  /** The key whose run it is: only that key (or an admin) is shown it. */
  keyId: string
  type: FeedItemType
  /** The run's summary (`run`) or `{ id }` (`removed`), as JSON. */
  data: string
}

export interface FeedBounds {
  /** Items kept for clients that resume (default 1000). */
  items?: number
  /** Bytes of their data kept (default 4 MiB): a run's metadata may be 32 KiB. */
  bytes?: number
}

/** A feed's position as a client sends it back (`Last-Event-ID`): this boot, and an item's number. */
const ID = /^([0-9a-f]{12})-(\d{1,15})$/

const STATE_EVENTS = new Set(['queued', 'started', 'end', 'interrupted'])

export class RunFeed {
  /** This process's feed: ids of another (a restarted server's) cannot be resumed. */
  readonly boot = randomBytes(6).toString('hex')
  private readonly ring: FeedItem[] = []
  private head = 0
  private bytes = 0
  private n = 0
  private readonly listeners = new Set<(item: FeedItem) => void>()
  private readonly maxItems: number
  private readonly maxBytes: number

  constructor(
    private readonly getRun: (id: string) => RunRecord | null,
    bounds: FeedBounds = {},
  ) {
    this.maxItems = bounds.items ?? 1000
    this.maxBytes = bounds.bytes ?? 4 * 1024 * 1024
  }

  /** A run's event as published: a change of its state becomes an item. Never throws. */
  see(event: RunEvent): void {
    if (!STATE_EVENTS.has(event.type)) return
    let run: RunRecord | null
    try {
      run = this.getRun(event.runId)
    } catch {
      return // the store failed this read: a client sees the change at its next sync
    }
    if (run) this.add(run.keyId, 'run', JSON.stringify(runView(run)))
  }

  /** A run was removed (by its key: retention's removals are seen at the next sync). */
  removed(run: Pick<RunRecord, 'id' | 'keyId'>): void {
    this.add(run.keyId, 'removed', JSON.stringify({ id: run.id }))
  }

  /** The id of the latest item (`<boot>-0` before any): where a client that lists now resumes from. */
  position(): string {
    return this.idOf(this.n)
  }

  idOf(n: number): string {
    return `${this.boot}-${n}`
  }

  /** Whether `id` has the shape of a feed id (of any boot). */
  static valid(id: string): boolean {
    return ID.test(id)
  }

  /**
   * The items after `id` that `key` may see, or null when the feed no longer has all of them (another
   * boot's id, one older than the ring, one not yet given): then the client must list again.
   */
  after(key: KeyRecord, id: string): FeedItem[] | null {
    checkKey(key)
    const m = ID.exec(id)
    if (!m || m[1] !== this.boot) return null
    const n = Number(m[2])
    if (n > this.n) return null
    const oldest = this.ring[this.head]?.n ?? this.n + 1
    if (n + 1 < oldest) return null
    const out: FeedItem[] = []
    for (let i = this.head; i < this.ring.length; i++) {
      const item = this.ring[i] as FeedItem
      if (item.n > n && mayFollow(key, item)) out.push(item)
    }
    return out
  }

  /**
   * Follows the items `key` may see from now on (a key that may not read runs is refused: ServiceError).
   * Returns its stop().
   */
  follow(key: KeyRecord, listener: (item: FeedItem) => void): () => void {
    checkKey(key)
    const mine = (item: FeedItem) => {
      if (mayFollow(key, item)) listener(item)
    }
    this.listeners.add(mine)
    return () => {
      this.listeners.delete(mine)
    }
  }

  /** Listeners now (for tests and metrics). */
  get following(): number {
    return this.listeners.size
  }

  private add(keyId: string, type: FeedItemType, data: string): void {
    const item: FeedItem = { n: ++this.n, keyId, type, data }
    this.ring.push(item)
    this.bytes += data.length
    while (
      this.ring.length - this.head > this.maxItems ||
      (this.bytes > this.maxBytes && this.head < this.ring.length - 1)
    ) {
      this.bytes -= (this.ring[this.head] as FeedItem).data.length
      this.head++
    }
    // Drop what was let go once it is half the array, not at every item.
    if (this.head > this.maxItems) {
      this.ring.splice(0, this.head)
      this.head = 0
    }
    for (const listener of [...this.listeners]) {
      try {
        listener(item)
      } catch {
        // a listener's failure is its own
      }
    }
  }
}

/** The key may read runs at all: `runs:read`, or admin; and it is not revoked. */
export function checkKey(key: KeyRecord): void {
  if (key.revokedAt !== null) throw new ServiceError('unauthorized', 'this key was revoked')
  if (!key.scopes.includes('runs:read') && !key.scopes.includes('admin'))
    throw new ServiceError('forbidden', 'this key lacks the runs:read scope')
}

/** An item of its own runs, or any for an admin. */
function mayFollow(key: KeyRecord, item: FeedItem): boolean {
  return item.keyId === key.id || key.scopes.includes('admin')
}
