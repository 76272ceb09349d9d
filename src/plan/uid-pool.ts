// One unprivileged uid per sandbox when cordon runs as root. A lock file per uid (holding the owner's pid)
// keeps concurrent cordon processes on one host apart; a lock whose owner is dead is taken over.
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { isAlive } from '../run/procs.js'

export interface UidPool {
  first: number
  count: number
  lockDir: string
}

export interface UidLease {
  uid: number
  gid: number
  /** The lock was taken over from a dead owner, whose sandbox may have left processes behind. */
  inherited: boolean
  release(): void
}

/**
 * Create the lock file holding our pid; false when it already exists. The pid is written to a private
 * file first and hard-linked into place, so a lock is never seen empty.
 */
function create(file: string): boolean {
  const draft = `${file}.${process.pid}.draft`
  writeFileSync(draft, String(process.pid), { mode: 0o600 })
  try {
    linkSync(draft, file)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    unlinkSync(draft)
  }
}

/** 'fresh' or 'inherited' (taken over from a dead owner) when we hold the lock, false when we do not. */
function tryLock(file: string): 'fresh' | 'inherited' | false {
  if (create(file)) return 'fresh'
  let owner = Number.NaN
  try {
    owner = Number(readFileSync(file, 'utf8'))
  } catch {
    // Released between our open and read: fall through and try again.
  }
  // Only a lock whose owner is known and dead is stale. (Two hosts taking over the same stale lock at
  // the same instant could both win; stale locks only exist after a crash, so that race is left open.)
  if (!(Number.isInteger(owner) && owner > 0) || isAlive(owner)) return false
  try {
    unlinkSync(file)
  } catch {
    // Someone else took it over first.
  }
  return create(file) && 'inherited'
}

/**
 * Claim a free uid. All sandboxes share one gid (the pool's first id) so an operator can hand a
 * directory to every sandbox with one `chgrp`; the uid alone keeps them apart.
 */
export function claimUid(pool: UidPool): UidLease {
  mkdirSync(pool.lockDir, { recursive: true, mode: 0o700 })
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
        release() {
          if (released) return
          released = true
          try {
            unlinkSync(file)
          } catch {
            // Already gone; nothing to release.
          }
        },
      }
    }
  }
  throw new Error(`all ${pool.count} sandbox uids from ${pool.first} are in use (uidPool)`)
}
