// One unprivileged uid per sandbox when cordon runs as root. A lock per uid (a symlink naming the owner's
// pid) keeps concurrent cordon processes on one host apart; a lock whose owner is dead is taken over.
import { mkdirSync, readFileSync, readlinkSync, symlinkSync, unlinkSync } from 'node:fs'
import path from 'node:path'
import * as z from 'zod'
import { isAlive } from './procs.js'

export const uidPoolSchema = z.strictObject({
  first: z
    .number()
    .int()
    .positive()
    .default(60_000)
    .describe('the first uid handed to sandboxes when cordon runs as root; also their shared gid'),
  count: z.number().int().positive().default(1000).describe('how many uids, from `first`, the pool holds'),
  lockDir: z
    .string()
    .default('/run/cordon/uids')
    .describe('lock files here make concurrent cordon processes on one host take distinct uids'),
})

/** The pool, parsed (policy/schema.ts composes its schema into the options). */
export type UidPool = z.output<typeof uidPoolSchema>

export interface UidLease {
  uid: number
  gid: number
  /** The lock was taken over from a dead owner, whose sandbox may have left processes behind. */
  inherited: boolean
  /** Until release(): only while it is held are the uid's processes this run's. */
  held(): boolean
  release(): void
}

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code

/**
 * Create the lock naming our pid; false when it exists. A symlink whose target is the pid is made in one
 * atomic step, so a lock is never seen empty, and costs one syscall (the lock directory is made only when
 * missing).
 */
function create(file: string): boolean {
  for (let attempt = 0; ; attempt++) {
    try {
      symlinkSync(String(process.pid), file)
      return true
    } catch (error) {
      if (errorCode(error) === 'EEXIST') return false
      if (errorCode(error) !== 'ENOENT' || attempt > 0) throw error
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
    }
  }
}

/** The pid a lock names (a regular file's content, as earlier versions wrote); null when it is gone. */
function lockOwner(file: string): number | null {
  try {
    return Number(readlinkSync(file))
  } catch (error) {
    if (errorCode(error) !== 'EINVAL') return null
  }
  try {
    const text = readFileSync(file, 'utf8').trim()
    return text ? Number(text) : Number.NaN
  } catch {
    return null
  }
}

/** A lock is stale only when its owner is known and dead. */
function stale(owner: number | null): owner is number {
  return owner !== null && Number.isInteger(owner) && owner > 0 && !isAlive(owner)
}

function remove(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // Already gone.
  }
}

/** 'fresh' or 'inherited' (taken over from a dead owner) when we hold the lock, false when we do not. */
function tryLock(file: string): 'fresh' | 'inherited' | false {
  if (create(file)) return 'fresh'
  const owner = lockOwner(file)
  if (!stale(owner)) return false
  // One claimer at a time takes a stale lock over, under a second lock; whoever comes after finds the
  // lock no longer names the dead owner. A takeover that itself died is cleared for the next claim.
  const gate = `${file}.takeover`
  if (!create(gate)) {
    if (stale(lockOwner(gate))) remove(gate)
    return false
  }
  try {
    if (lockOwner(file) !== owner) return false
    remove(file)
    return create(file) && 'inherited'
  } finally {
    remove(gate)
  }
}

/**
 * Claim a free uid; null when every uid of the pool is in use (the run then ends as an `error` result).
 * All sandboxes share one gid (the pool's first id) so an operator can hand a directory to every sandbox
 * with one `chgrp`; the uid alone keeps them apart.
 */
export function claimUid(pool: UidPool): UidLease | null {
  const start = Math.floor(Math.random() * pool.count)
  for (let i = 0; i < pool.count; i++) {
    const uid = pool.first + ((start + i) % pool.count)
    const file = path.join(pool.lockDir, String(uid))
    const locked = tryLock(file)
    if (locked) {
      let released = false
      return {
        uid,
        gid: pool.first,
        inherited: locked === 'inherited',
        held: () => !released,
        release() {
          if (released) return
          released = true
          remove(file)
        },
      }
    }
  }
  return null
}
