// A sandbox's warm members (createSandbox({ warm })): up to `members` of them ready at once, made from the
// sandbox's own options alone (one policy, one shape), in the background and off every run's path: at the
// start, and again as each run that used one ends. Bounded (at most MAX_MEMBERS, two being made at a
// time), owned by this process (they die with it), recycled once idle for `idleMs`, so nothing in a member
// is older than that. A member is single use (see run/warm.ts): the pool never gets one back from a run.
import { PolicyError } from '../errors.js'
import { recentCapabilities } from '../host/capabilities.js'
import type { AnyRunOptions, Policy } from '../policy/schema.js'
import { parsePolicy } from '../policy/schema.js'
import { WarmMember, type WarmSource } from '../run/warm.js'
import { spawnerForRun } from '../spawner/default.js'

/** At most this many members per sandbox: each is three processes and a uid of the pool. */
export const MAX_MEMBERS = 64
/** Members made at once: making them is CPU the runs share. */
const MAKING_AT_ONCE = 2
/**
 * Members are made only after this long without a run that found none: while runs come faster than members
 * are made, making them too would only take the CPU those runs need (a pool helps latency, not sustained
 * throughput: a member moves a run's set-up ahead of it, it does not remove it).
 */
const QUIET_MS = 50
/** After this many members in a row failed to become ready, making pauses for PAUSE_MS. */
const FAILURES_IN_A_ROW = 3
const PAUSE_MS = 10_000
export const DEFAULT_IDLE_MS = 60_000

/** How the warm members of a sandbox fare; `cold` says why none can be made, while that holds. */
export interface WarmStats {
  /** The most kept ready at once. */
  members: number
  ready: number
  making: number
  /** Runs that were given a member, and runs that found none that fitted them. */
  hits: number
  misses: number
  /** Members given up unused: idle too long, or what they were made on changed. */
  recycled: number
  /** Members that failed to become ready. */
  failed: number
  cold?: string
}

export class WarmPool implements WarmSource {
  private readonly ready: WarmMember[] = []
  private readonly all = new Set<WarmMember>()
  private making = 0
  private closed = false
  private failuresInARow = 0
  private pausedUntil = 0
  private policy: Policy | null = null
  private readonly counts = { hits: 0, misses: 0, recycled: 0, failed: 0 }
  private cold: string | undefined
  private readonly sweep: NodeJS.Timeout
  /** When a run last found no member; the fill that waits for the quiet after it. */
  private lastMiss = 0
  private afterQuiet: NodeJS.Timeout | undefined

  constructor(
    private readonly options: AnyRunOptions,
    private readonly size: number,
    private readonly idleMs: number,
  ) {
    this.sweep = setInterval(() => this.recycleIdle(), Math.max(250, idleMs / 2))
    this.sweep.unref()
    setImmediate(() => this.fill())
  }

  take(): WarmMember | null {
    this.recycleIdle()
    const member = this.ready.shift() ?? null
    if (!member) this.missed()
    return member
  }

  /** A run found no member: fill once runs stop finding none (see QUIET_MS). */
  private missed(): void {
    this.counts.misses++
    this.lastMiss = Date.now()
    clearTimeout(this.afterQuiet)
    this.afterQuiet = setTimeout(() => this.fill(), QUIET_MS)
    this.afterQuiet.unref()
  }

  giveBack(member: WarmMember, why: 'other' | 'stale'): void {
    if (why === 'other' && !this.closed && member.state === 'ready') {
      // Another shape's run: not a sign that members run short.
      this.counts.misses++
      this.ready.unshift(member)
      return
    }
    this.counts.recycled++
    this.drop(member)
    setImmediate(() => this.fill())
  }

  used(member: WarmMember, ended: Promise<unknown>): void {
    this.counts.hits++
    this.all.delete(member)
    // Made again once the run that used it has ended: making one meanwhile would slow that run.
    const again = () => {
      if (Date.now() - this.lastMiss >= QUIET_MS) this.fill()
    }
    ended.then(again, again)
  }

  stats(): WarmStats {
    return {
      members: this.size,
      ready: this.ready.length,
      making: this.making,
      ...this.counts,
      ...(this.cold !== undefined ? { cold: this.cold } : {}),
    }
  }

  /** No more members; those ready are destroyed (the runs' own end with their runs). */
  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.sweep)
    clearTimeout(this.afterQuiet)
    this.ready.length = 0
    await Promise.all([...this.all].map((m) => m.destroy()))
    this.all.clear()
  }

  private fill(): void {
    if (this.closed || Date.now() < this.pausedUntil) return
    const policy = this.policyOrNull()
    if (!policy) return
    while (this.ready.length + this.making < this.size && this.making < MAKING_AT_ONCE) {
      if (!this.makeOne(policy)) return
    }
  }

  private policyOrNull(): Policy | null {
    if (this.policy) return this.policy
    try {
      this.policy = parsePolicy(this.options)
    } catch (error) {
      // The sandbox's runs say it (each throws the PolicyError): no member can have this shape.
      this.cold = error instanceof PolicyError ? error.message : String(error)
      this.closed = true
    }
    return this.policy
  }

  /** Start making one; false when none can be made now (the reason is in `cold`). */
  private makeOne(policy: Policy): boolean {
    if (policy.spawner && !policy.spawner.usable) {
      // Its runs throw SpawnerError; members forked from the host instead would be a surprise.
      this.cold = "the sandbox's spawner is closed"
      this.pausedUntil = Date.now() + PAUSE_MS
      return false
    }
    const spawner = policy.spawner === false ? null : (policy.spawner ?? spawnerForRun())
    let made: ReturnType<typeof WarmMember.create>
    try {
      made = WarmMember.create(policy, recentCapabilities(policy.cgroup.parent), spawner, {
        ready: (m) => this.onReady(m),
        lost: (m, why) => this.onLost(m, why),
      })
    } catch (error) {
      made = { cold: (error as Error).message }
    }
    if ('cold' in made) {
      this.cold = made.cold
      this.pausedUntil = Date.now() + PAUSE_MS
      return false
    }
    this.cold = undefined
    this.making++
    this.all.add(made)
    return true
  }

  private onReady(member: WarmMember): void {
    this.making--
    this.failuresInARow = 0
    if (this.closed) {
      this.drop(member)
      return
    }
    this.ready.push(member)
    this.fill()
  }

  private onLost(member: WarmMember, why: string): void {
    const index = this.ready.indexOf(member)
    if (index >= 0) {
      this.ready.splice(index, 1)
      this.counts.recycled++
    } else {
      this.making--
      this.counts.failed++
      this.cold = why
      if (++this.failuresInARow >= FAILURES_IN_A_ROW) this.pausedUntil = Date.now() + PAUSE_MS
    }
    this.all.delete(member)
    setImmediate(() => this.fill())
  }

  /** Members ready for longer than idleMs go, and new ones are made in their place. */
  private recycleIdle(): void {
    const old = Date.now() - this.idleMs
    let recycled = false
    while (this.ready.length > 0 && this.ready[0]!.readyAt <= old) {
      this.counts.recycled++
      this.drop(this.ready.shift()!)
      recycled = true
    }
    if (recycled) setImmediate(() => this.fill())
  }

  private drop(member: WarmMember): void {
    this.all.delete(member)
    void member.destroy()
  }
}
