// The socket directory of a cordon process that died mid-run (SIGKILL cleans nothing up) is removed by the
// next cordon that starts a proxy. A file of its own: the sweep looks at a directory once per 10 s per
// process, and other proxy tests would have had that look.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { NetworkProxy } from '../../src/net/proxy.js'
import { noLauncher, waitFor } from '../helpers.js'

describe('proxy directories left by a dead cordon', { skip: noLauncher }, () => {
  it('are removed when the next proxy starts; a living owner keeps its own', async () => {
    const dead = spawnSync('true').pid!
    const stale = path.join(os.tmpdir(), `cordon-net-${dead}-leftover`)
    const alive = path.join(os.tmpdir(), `cordon-net-${process.pid}-mine`)
    for (const dir of [stale, alive]) {
      mkdirSync(dir)
      writeFileSync(path.join(dir, 'bridge'), '')
    }
    // A link in a leftover is removed as a link, never followed.
    const outside = path.join(os.tmpdir(), `cordon-net-test-outside-${process.pid}`)
    writeFileSync(outside, 'keep')
    symlinkSync(outside, path.join(stale, 'http.sock'))
    const proxy = new NetworkProxy({
      allow: [],
      deny: [],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: false,
    })
    try {
      assert.ok(path.basename(proxy.dir).startsWith(`cordon-net-${process.pid}-`), proxy.dir)
      assert.ok(await waitFor(() => !existsSync(stale), 5000), `${stale} is still there`)
      assert.ok(existsSync(alive), 'a living owner lost its directory')
      assert.ok(existsSync(outside), 'the link was followed')
    } finally {
      await proxy.close()
      spawnSync('rm', ['-rf', alive, outside, stale])
    }
  })
})
