import assert from 'node:assert/strict'
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { claimUid, type UidLease, type UidPool } from '../../src/host/uid-pool.js'

// Above the kernel's PID_MAX_LIMIT (2^22), so no process can have it.
const DEAD_PID = '999999999'

let root: string
let leases: UidLease[]

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'cordon-uids-'))
  leases = []
})

afterEach(() => {
  for (const lease of leases) lease.release()
  rmSync(root, { recursive: true, force: true })
})

const pool = (count: number, first = 70_000): UidPool => ({ first, count, lockDir: path.join(root, 'locks') })
/** A lease, or a throw naming uidPool when the pool is exhausted (claimUid's null). */
const claimOrThrow = (p: UidPool): UidLease => {
  const lease = claimUid(p)
  if (!lease) throw new Error('every uid is in use (uidPool)')
  return lease
}
const claim = (p: UidPool): UidLease => {
  const lease = claimOrThrow(p)
  leases.push(lease)
  return lease
}
const lockFile = (p: UidPool, uid: number) => path.join(p.lockDir, String(uid))
/** Whether a lock exists (existsSync would follow the symlink to a file named by the pid). */
const isLocked = (p: UidPool, uid: number) =>
  lstatSync(lockFile(p, uid), { throwIfNoEntry: false }) !== undefined
/** The pid a lock names: the target of its symlink. */
const ownerOf = (p: UidPool, uid: number) => readlinkSync(lockFile(p, uid))
/** Leave a lock file for `uid` as an earlier cordon version (or its remains) would: a regular file. */
const plantLock = (p: UidPool, uid: number, content: string) => {
  mkdirSync(p.lockDir, { recursive: true })
  writeFileSync(lockFile(p, uid), content)
}

describe('claimUid', () => {
  it('creates the lock dir and a lock: a symlink naming our pid, made in one step', () => {
    const p = pool(10)
    const lease = claim(p)
    assert.ok(
      lease.uid >= p.first && lease.uid < p.first + p.count,
      'lease.uid >= p.first && lease.uid < p.first + p.count',
    )
    assert.ok(lstatSync(lockFile(p, lease.uid)).isSymbolicLink(), 'a symlink')
    assert.equal(ownerOf(p, lease.uid), String(process.pid))
  })

  it('makes the lock dir again when it was removed between claims', () => {
    const p = pool(3)
    claim(p)
    rmSync(p.lockDir, { recursive: true, force: true })
    const lease = claim(p)
    assert.equal(ownerOf(p, lease.uid), String(process.pid))
  })

  it('gives every sandbox the pool’s first id as gid', () => {
    const p = pool(10)
    assert.equal(claim(p).gid, p.first)
    assert.equal(claim(p).gid, p.first)
  })

  it('gives two claims distinct uids', () => {
    const p = pool(2)
    const a = claim(p)
    const b = claim(p)
    assert.notEqual(a.uid, b.uid)
    assert.deepEqual([a.uid, b.uid].sort(), [p.first, p.first + 1])
  })

  it('hands out every uid of the pool exactly once, then refuses', () => {
    const p = pool(5)
    const uids = Array.from({ length: 5 }, () => claim(p).uid)
    assert.deepEqual(
      uids.sort((x, y) => x - y),
      [0, 1, 2, 3, 4].map((i) => p.first + i),
    )
    assert.equal(claimUid(p), null)
  })

  it('frees the uid on release so it can be claimed again', () => {
    const p = pool(1)
    const a = claimOrThrow(p)
    assert.ok(isLocked(p, a.uid), 'isLocked(p, a.uid)')
    a.release()
    assert.ok(!isLocked(p, a.uid), '!isLocked(p, a.uid)')
    const b = claim(p)
    assert.equal(b.uid, a.uid)
  })

  it('release is idempotent and never removes a lock that was claimed again', () => {
    const p = pool(1)
    const a = claimOrThrow(p)
    a.release()
    const b = claim(p)
    a.release()
    assert.ok(isLocked(p, b.uid), 'isLocked(p, b.uid)')
  })

  it('takes over a stale lock whose owner is dead', () => {
    const p = pool(1)
    plantLock(p, p.first, DEAD_PID)
    const lease = claim(p)
    assert.equal(lease.uid, p.first)
    assert.equal(lease.inherited, true)
    assert.equal(ownerOf(p, p.first), String(process.pid))
    assert.deepEqual(readdirSync(p.lockDir), [String(p.first)], 'no takeover lock left')
  })

  it('takes over a stale symlink lock too', () => {
    const p = pool(1)
    mkdirSync(p.lockDir, { recursive: true })
    symlinkSync(DEAD_PID, lockFile(p, p.first))
    assert.equal(claim(p).inherited, true)
    assert.equal(ownerOf(p, p.first), String(process.pid))
  })

  it('leaves a stale lock alone while a live claimer is taking it over', () => {
    const p = pool(1)
    plantLock(p, p.first, DEAD_PID)
    symlinkSync(String(process.pid), `${lockFile(p, p.first)}.takeover`)
    assert.throws(() => claim(p), /uidPool/)
  })

  it('clears a takeover whose claimer died, and the next claim takes the lock over', () => {
    const p = pool(1)
    plantLock(p, p.first, DEAD_PID)
    symlinkSync(DEAD_PID, `${lockFile(p, p.first)}.takeover`)
    assert.throws(() => claim(p), /uidPool/)
    assert.equal(claim(p).inherited, true)
    assert.equal(ownerOf(p, p.first), String(process.pid))
  })

  it('leaves a lock file holding garbage alone (its owner is unknown, so it is not known to be dead)', () => {
    const p = pool(1)
    plantLock(p, p.first, 'not a pid')
    assert.throws(() => claim(p), /uidPool/)
  })

  it('skips a uid whose lock is held by a live process', () => {
    const p = pool(2)
    plantLock(p, p.first, String(process.pid))
    for (let i = 0; i < 10; i++) {
      const lease = claimOrThrow(p)
      assert.equal(lease.uid, p.first + 1)
      lease.release()
    }
    assert.ok(isLocked(p, p.first), 'the live lock stays')
  })

  it('returns null when a pool of one is held by a live lock (the run becomes an error result)', () => {
    const p = pool(1, 61_234)
    claim(p)
    assert.equal(claimUid(p), null)
    assert.deepEqual(readdirSync(p.lockDir), ['61234'])
  })

  it('does not take over an empty lock file (a claimer between creating it and writing its pid)', {}, () => {
    const p = pool(1)
    plantLock(p, p.first, '')
    assert.throws(() => claim(p), /uidPool/)
  })
})
