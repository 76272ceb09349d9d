// `cordon rootfs delete NAME`: removes a named tree from the cache, and nothing else.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

describe('cordon rootfs delete', () => {
  const cache = tempDir('cordon-rootfs-cache-')
  const cordon = (...args: string[]) =>
    spawnSync(process.execPath, [CLI, 'rootfs', ...args], {
      encoding: 'utf8',
      env: { ...process.env, CORDON_ROOTFS_CACHE: cache },
    })
  const tree = (name: string) => {
    mkdirSync(path.join(cache, name, 'usr/bin'), { recursive: true })
    writeFileSync(path.join(cache, name, 'usr/bin/tool'), '')
    return path.join(cache, name)
  }

  it('removes the named tree; list no longer shows it', () => {
    const dir = tree('old')
    tree('kept')
    const r = cordon('delete', 'old')
    assert.equal(r.status, 0, r.stderr)
    assert.equal(existsSync(dir), false)
    assert.deepEqual(
      cordon('list')
        .stdout.split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]),
      ['kept'],
    )
  })

  it('refuses what is not a tree in the cache, naming it (exit 125)', () => {
    for (const name of ['missing', '../kept', '/etc', '.']) {
      const r = cordon('delete', name)
      assert.equal(r.status, 125, `${name}: ${r.stderr}`)
      assert.match(r.stderr, /name/)
    }
    mkdirSync(path.join(cache, 'notatree'))
    assert.equal(cordon('delete', 'notatree').status, 125)
    assert.ok(existsSync(path.join(cache, 'kept/usr/bin/tool')))
  })
})
