// /proc snapshots: the fields cordon finds a sandbox's processes by, read from real processes.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import {
  isLiving,
  listProcesses,
  livingByUid,
  livingDescendants,
  livingInSession,
  type ProcInfo,
  readProc,
  signalFound,
} from '../../src/host/procs.js'
import { notRoot, tempDir, waitFor } from '../helpers.js'

const pids = (found: readonly ProcInfo[]) => found.map((p) => p.pid)

describe('/proc snapshots', () => {
  it('this process: its parent, session and uid', () => {
    const self = listProcesses().find((p) => p.pid === process.pid)
    assert.ok(self, 'this process is listed')
    assert.equal(self.ppid, process.ppid)
    assert.equal(self.uid, process.getuid?.())
    assert.equal(self.zombie, false)
    assert.ok(pids(livingByUid(process.getuid?.() ?? 0)).includes(process.pid), 'found by its uid')
  })

  it('a program named with spaces and parentheses is read right, by session and by ancestry', async () => {
    // The command name sits in parentheses inside the stat line; only the last ')' ends it.
    const dir = tempDir('cordon-procs-')
    const odd = path.join(dir, 'a) b (c')
    copyFileSync('/bin/sleep', odd)
    const child = spawn(odd, ['30'], { detached: true, stdio: 'ignore' })
    try {
      const pid = child.pid!
      const info = listProcesses().find((p) => p.pid === pid)
      assert.ok(info, 'the child is listed')
      assert.equal(info.ppid, process.pid)
      assert.equal(info.sid, pid, 'detached: it leads its own session')
      assert.deepEqual(pids(livingInSession(pid)), [pid])
      assert.ok(pids(livingDescendants(process.pid)).includes(pid), 'a descendant of this process')
      assert.equal(isLiving(pid), true)
    } finally {
      child.kill('SIGKILL')
      await new Promise((resolve) => child.once('exit', resolve))
    }
    assert.equal(isLiving(child.pid!), false, 'gone once reaped')
  })

  it("a non-dumpable process is listed with its own uid, though its /proc files turn root's", {
    skip: notRoot,
  }, async () => {
    const uid = 65534
    const code =
      'import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print(1, flush=True); time.sleep(30)'
    const child = spawn('python3', ['-c', code], { uid, gid: uid, stdio: ['ignore', 'pipe', 'ignore'] })
    try {
      const ready = new Promise((resolve) => child.stdout!.once('data', resolve))
      await ready
      const pid = child.pid!
      assert.ok(await waitFor(() => listProcesses().some((p) => p.pid === pid), 5000), 'listed')
      assert.equal(listProcesses().find((p) => p.pid === pid)?.uid, uid)
      assert.ok(pids(livingByUid(uid)).includes(pid), 'found by its uid')
    } finally {
      child.kill('SIGKILL')
      await new Promise((resolve) => child.once('exit', resolve))
    }
  })
})

describe('signalFound: only the process that was found, never a pid reused since', () => {
  const then = { pid: 4242, ppid: 1, uid: 60001, sid: 4242, start: 1000, zombie: false, stopped: false }
  /** signalFound over one found process, with the kernel answering `now` for it; the pids signalled. */
  const attempt = (
    now: ProcInfo | null,
    still: (now: ProcInfo, then: ProcInfo) => boolean = (p) => p.uid === 60001 && p.sid === 4242,
  ) => {
    const sent: number[] = []
    signalFound([then], 'SIGKILL', still, { read: () => now, kill: (pid) => sent.push(pid) })
    return sent
  }

  it('signals it while it is unchanged', () => {
    assert.deepEqual(attempt({ ...then }), [4242])
  })

  it('not when its start time changed: the pid is another process now', () => {
    assert.deepEqual(attempt({ ...then, start: 1001 }), [])
  })

  it('not when it no longer matches what it was found by (uid, session)', () => {
    assert.deepEqual(attempt({ ...then, uid: 60002 }), [])
    assert.deepEqual(attempt({ ...then, sid: 7 }), [])
  })

  it('not when it is gone or a zombie', () => {
    assert.deepEqual(attempt(null), [])
    assert.deepEqual(attempt({ ...then, zombie: true }), [])
  })

  it('the criterion sees the process as it is now and as it was found', () => {
    const seen: [number, number][] = []
    attempt({ ...then, ppid: 9 }, (now, was) => {
      seen.push([now.ppid, was.ppid])
      return true
    })
    assert.deepEqual(seen, [[9, 1]])
  })

  it('for real: a living process found earlier is signalled only under its own start time', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' })
    const exited = new Promise((resolve) => child.once('exit', (_, sig) => resolve(sig)))
    try {
      const found = readProc(child.pid!)
      assert.ok(found, 'read')
      assert.deepEqual(
        signalFound([{ ...found, start: found.start - 1 }], 'SIGKILL', () => true),
        [],
      )
      assert.equal(isLiving(child.pid!), true, 'an older process of that pid is not this one')
      assert.deepEqual(
        signalFound([found], 'SIGKILL', (now) => now.ppid === process.pid),
        [child.pid],
      )
      assert.equal(await exited, 'SIGKILL')
    } finally {
      child.kill('SIGKILL')
    }
  })
})
