// test: slow (builds a Debian root filesystem with debootstrap the first time: ~45 s)
// Another root filesystem: a minimal Debian tree built once with `cordon rootfs create` (cached between
// runs in the rootfs cache), holding busybox, which the host does not have.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { lchownSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs'
import path from 'node:path'
import { before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { PolicyError, run } from '../../src/index.js'
import { listRootfs } from '../../src/rootfs/rootfs.js'
import { noNamespace, notRoot, tempDir, worldWritableDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const NAME = 'cordon-test-minbase'
const hasDebootstrap =
  spawnSync('sh', ['-c', 'command -v debootstrap || test -x /usr/sbin/debootstrap']).status === 0
const skip =
  noNamespace || (hasDebootstrap ? false : 'debootstrap is not installed (apt-get install debootstrap)')

describe('root filesystems', { skip }, () => {
  before(() => {
    if (listRootfs().some((r) => r.name === NAME)) return
    const built = spawnSync(process.execPath, [CLI, 'rootfs', 'create', NAME, '--packages', 'busybox'], {
      encoding: 'utf8',
      timeout: 600_000,
    })
    assert.equal(built.status, 0, built.stderr.slice(-2000))
  })

  it('is listed with its own os-release', () => {
    const r = spawnSync(process.execPath, [CLI, 'rootfs', 'list'], { encoding: 'utf8' })
    assert.match(r.stdout, new RegExp(`^${NAME}\\t\\S+\\tDebian GNU/Linux`, 'm'))
  })

  it("runs a program the host does not have, with the tree's userland, read-only", async () => {
    assert.notEqual(spawnSync('sh', ['-c', 'command -v busybox']).status, 0, 'the host has no busybox')
    const r = await run(
      ['sh', '-c', 'busybox echo from-busybox; grep ^ID= /etc/os-release; touch /usr/x || echo ro'],
      {
        rootfs: NAME,
      },
    )
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, 'from-busybox\nID=debian\nro\n')
  })

  it('host-only programs are not there; the cwd and writable paths are, with a private /tmp', async () => {
    assert.equal((await run(['node', '-e', '1'], { rootfs: NAME })).status, 'not-found')
    const dir = worldWritableDir()
    const r = await run(['sh', '-c', 'pwd; echo out > result; echo tmp > /tmp/t && cat /tmp/t'], {
      rootfs: NAME,
      cwd: dir,
      writable: [dir],
    })
    assert.equal(r.stdout, `${dir}\ntmp\n`)
    assert.equal(readFileSync(`${dir}/result`, 'utf8'), 'out\n')
  })

  it("shows the tree's own /etc/passwd and /etc/group, not cordon's (its users are not the host's)", async () => {
    const tree = listRootfs().find((r) => r.name === NAME)!.dir
    const r = await run(['cat', '/etc/passwd', '/etc/group'], { rootfs: NAME })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(
      r.stdout,
      readFileSync(`${tree}/etc/passwd`, 'utf8') + readFileSync(`${tree}/etc/group`, 'utf8'),
    )
  })

  it('refuses a name that was never built, and the process tier', async () => {
    await assert.rejects(
      run(['true'], { rootfs: 'no-such-rootfs' }),
      (e: unknown) =>
        e instanceof PolicyError && e.field === 'rootfs' && /cordon rootfs create/.test(e.message),
    )
    const p = await run(['true'], { rootfs: NAME, isolation: 'process' })
    assert.equal(p.status, 'error')
    assert.equal(p.violation?.limit, 'rootfs')
  })
})

describe('a root filesystem given as a path', { skip: noNamespace || notRoot }, () => {
  it('is judged as the other named paths are: never through a symlink a sandbox uid planted', async () => {
    const dir = tempDir('cordon-tree-', { mode: 0o755, parent: '/var/tmp' })
    mkdirSync(path.join(dir, 'tree', 'usr'), { recursive: true })
    const link = path.join(dir, 'current')
    symlinkSync(path.join(dir, 'tree'), link)
    lchownSync(link, 60123, 60000)
    await assert.rejects(
      run(['true'], { rootfs: link }),
      (e: unknown) =>
        e instanceof PolicyError && e.field === 'rootfs' && /symlink owned by uid 60123/.test(e.message),
    )
  })
})
