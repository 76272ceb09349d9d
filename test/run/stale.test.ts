// Leftovers of cordon processes that died mid-run, found by the owner pid in their names.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { staleEntries } from '../../src/run/stale.js'
import { noLauncher, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))

/** A pid that just exited (reuse within the test is unlikely on a pid space this large). */
const deadPid = () => spawnSync('true').pid!

describe('staleEntries', () => {
  it('names owned by a dead pid, not a living one, not another prefix; at most once per 10 s', () => {
    const parent = tempDir('cordon-stale-')
    const dead = deadPid()
    for (const name of [`x-${dead}-a`, `x-${process.pid}-b`, 'x-notapid-c', `y-${dead}-d`, `x-${dead}`]) {
      mkdirSync(path.join(parent, name))
    }
    assert.deepEqual(staleEntries(parent, 'x-').sort(), [`x-${dead}`, `x-${dead}-a`])
    assert.deepEqual(staleEntries(parent, 'x-'), [], 'looked at again within 10 s')
    assert.deepEqual(staleEntries(parent, 'y-'), [`y-${dead}-d`], 'each prefix on its own')
  })

  it('a missing directory has none', () => {
    assert.deepEqual(staleEntries('/nonexistent/cordon', 'x-'), [])
  })
})

describe('private TMPDIRs of a dead cordon', { skip: noLauncher }, () => {
  it('are removed, with what they hold, by the next process-tier run', () => {
    const left = path.join(os.tmpdir(), `cordon-tmp-${deadPid()}-test`)
    mkdirSync(path.join(left, 'deep'), { recursive: true })
    writeFileSync(path.join(left, 'deep', 'file'), 'x')
    const mine = path.join(os.tmpdir(), `cordon-tmp-${process.pid}-test`)
    mkdirSync(mine)
    try {
      // A fresh cordon process: its first process-tier run sweeps.
      const r = spawnSync(process.execPath, [CLI, 'run', '--isolation', 'process', '--', 'true'])
      assert.equal(r.status, 0, String(r.stderr))
      const deadline = Date.now() + 5000
      while (existsSync(left) && Date.now() < deadline) spawnSync('sleep', ['0.05'])
      assert.equal(existsSync(left), false, `${left} is still there`)
      assert.equal(existsSync(mine), true, "a living owner's is kept")
    } finally {
      spawnSync('rm', ['-rf', left, mine])
    }
  })
})
