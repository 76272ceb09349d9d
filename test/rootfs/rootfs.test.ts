// Managing root filesystems: what the machine does to a management call (no debootstrap, a failed build)
// is a RootfsError with a code, not a bare Error; a bad name is invalid input (PolicyError).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  CordonError,
  createRootfs,
  deleteRootfs,
  listRootfs,
  PolicyError,
  RootfsError,
} from '../../src/index.js'
import { resolveRootfs } from '../../src/rootfs/rootfs.js'
import { tempDir } from '../helpers.js'

/** Runs `fn` with PATH set to `dir` only, so `debootstrap` is whatever `dir` holds (or nothing). */
async function withPath<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const saved = process.env.PATH
  process.env.PATH = dir
  try {
    return await fn()
  } finally {
    process.env.PATH = saved
  }
}

describe('createRootfs', () => {
  it('without debootstrap: a RootfsError with code debootstrap-missing', async () => {
    const cacheDir = tempDir('cordon-rootfs-cache-')
    const empty = tempDir('cordon-rootfs-path-')
    const error = await withPath(empty, () => createRootfs('t1', { cacheDir })).then(
      () => assert.fail('created'),
      (e: unknown) => e,
    )
    assert.ok(error instanceof RootfsError, String(error))
    assert.ok(error instanceof CordonError)
    assert.equal(error.code, 'debootstrap-missing')
    assert.match(error.message, /apt-get install -y debootstrap/)
    assert.deepEqual(readdirSync(cacheDir), [], 'a failed build leaves nothing')
  })

  it('a failed debootstrap: a RootfsError with code debootstrap-failed, and nothing left', async () => {
    const cacheDir = tempDir('cordon-rootfs-cache-')
    const bin = tempDir('cordon-rootfs-path-')
    const fake = path.join(bin, 'debootstrap')
    writeFileSync(fake, '#!/bin/sh\nmkdir -p "$3/usr"\necho "E: no network" >&2\nexit 3\n')
    chmodSync(fake, 0o755)
    const error = await withPath(`${bin}:/usr/bin:/bin`, () => createRootfs('t2', { cacheDir })).then(
      () => assert.fail('created'),
      (e: unknown) => e,
    )
    assert.ok(error instanceof RootfsError, String(error))
    assert.equal(error.code, 'debootstrap-failed')
    assert.match(error.message, /exit code 3/)
    assert.equal(existsSync(path.join(cacheDir, 't2')), false)
    assert.equal(existsSync(path.join(cacheDir, 't2.partial')), false)
  })

  it('an invalid name is invalid input: a PolicyError naming the field', async () => {
    await assert.rejects(
      createRootfs('../x', { cacheDir: tempDir('cordon-rootfs-cache-') }),
      (e: unknown) => e instanceof PolicyError && e.field === 'name',
    )
  })

  it('NAME.partial is where NAME is built: no tree may be called that', async () => {
    // Such a tree was built, then listed by nobody, and removed by the next `create NAME` as its leftover.
    const cacheDir = tempDir('cordon-rootfs-cache-')
    const bin = tempDir('cordon-rootfs-path-')
    const fake = path.join(bin, 'debootstrap')
    writeFileSync(fake, '#!/bin/sh\nfor a; do t="$p"; p="$a"; done\nmkdir -p "$t/usr"\n')
    chmodSync(fake, 0o755)
    const named = (field: string) => (e: unknown) => e instanceof PolicyError && e.field === field
    await withPath(`${bin}:/usr/bin:/bin`, async () => {
      await assert.rejects(createRootfs('t3.partial', { cacheDir }), named('name'))
      assert.deepEqual(readdirSync(cacheDir), [])
      await createRootfs('t3', { cacheDir })
    })
    assert.deepEqual(
      listRootfs(cacheDir).map((r) => r.name),
      ['t3'],
    )
    mkdirSync(path.join(cacheDir, 't4.partial/usr'), { recursive: true })
    assert.throws(() => deleteRootfs('t4.partial', cacheDir), named('name'))
    assert.throws(() => resolveRootfs('t4.partial', cacheDir), named('rootfs'))
    assert.ok(existsSync(path.join(cacheDir, 't4.partial/usr')), 'a build under way is left alone')
  })
})

describe('cordon rootfs create', () => {
  it('says what the machine did, with exit 125 and no stack trace', () => {
    const cli = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
    const env = {
      ...process.env,
      PATH: tempDir('cordon-rootfs-path-'),
      CORDON_ROOTFS_CACHE: tempDir('cordon-rootfs-cache-'),
    }
    const r = spawnSync(process.execPath, [cli, 'rootfs', 'create', 't3'], { encoding: 'utf8', env })
    assert.equal(r.status, 125, r.stderr)
    assert.match(r.stderr, /^cordon: could not run debootstrap \(apt-get install -y debootstrap\)/)
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'a stack trace')
  })
})
