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
} from '../../src/run/procs.js'
import { notRoot, tempDir, waitFor } from '../helpers.js'

describe('/proc snapshots', () => {
  it('this process: its parent, session and uid', () => {
    const self = listProcesses().find((p) => p.pid === process.pid)
    assert.ok(self, 'this process is listed')
    assert.equal(self.ppid, process.ppid)
    assert.equal(self.uid, process.getuid?.())
    assert.equal(self.zombie, false)
    assert.ok(livingByUid(process.getuid?.() ?? 0).includes(process.pid), 'found by its uid')
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
      assert.deepEqual(livingInSession(pid), [pid])
      assert.ok(livingDescendants(process.pid).includes(pid), 'a descendant of this process')
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
      assert.ok(livingByUid(uid).includes(pid), 'found by its uid')
    } finally {
      child.kill('SIGKILL')
      await new Promise((resolve) => child.once('exit', resolve))
    }
  })
})
