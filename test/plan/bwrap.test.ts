import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { bwrapArgs } from '../../src/plan/bwrap.js'

const BASE = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp']
const tail = (cwd: string) => ['--hostname', 'cordon', '--die-with-parent', '--new-session', '--chdir', cwd]

describe('bwrapArgs', () => {
  it('builds the default argv: read-only root, cwd bound read-only, every namespace unshared', () => {
    assert.deepEqual(bwrapArgs({ writable: [], cwd: '/work', network: 'none' }), [
      ...BASE,
      '--ro-bind',
      '/work',
      '/work',
      '--unshare-all',
      ...tail('/work'),
    ])
  })

  it('adds --share-net right after --unshare-all for network host', () => {
    assert.deepEqual(bwrapArgs({ writable: [], cwd: '/work', network: 'host' }), [
      ...BASE,
      '--ro-bind',
      '/work',
      '/work',
      '--unshare-all',
      '--share-net',
      ...tail('/work'),
    ])
  })

  it('never shares the network for network none', () => {
    assert.ok(!bwrapArgs({ writable: ['/data'], cwd: '/data', network: 'none' }).includes('--share-net'))
  })

  it('binds nested writable paths parent first whatever order they are given in', () => {
    const args = bwrapArgs({ writable: ['/data/a/b', '/out', '/data', '/data/a'], cwd: '/', network: 'none' })
    assert.deepEqual(args, [
      ...BASE,
      '--ro-bind',
      '/',
      '/',
      '--bind',
      '/out',
      '/out',
      '--bind',
      '/data',
      '/data',
      '--bind',
      '/data/a',
      '/data/a',
      '--bind',
      '/data/a/b',
      '/data/a/b',
      '--unshare-all',
      ...tail('/'),
    ])
  })

  it('does not modify the writable list it is given', () => {
    const writable = ['/data/a', '/data']
    bwrapArgs({ writable, cwd: '/data', network: 'none' })
    assert.deepEqual(writable, ['/data/a', '/data'])
  })

  it('does not ro-bind a cwd that a writable path is', () => {
    assert.deepEqual(bwrapArgs({ writable: ['/tmp/job'], cwd: '/tmp/job', network: 'none' }), [
      ...BASE,
      '--bind',
      '/tmp/job',
      '/tmp/job',
      '--unshare-all',
      ...tail('/tmp/job'),
    ])
  })

  it('does not ro-bind a cwd that lies under a writable path', () => {
    assert.deepEqual(
      bwrapArgs({ writable: ['/home/u/proj'], cwd: '/home/u/proj/src/lib', network: 'none' }),
      [...BASE, '--bind', '/home/u/proj', '/home/u/proj', '--unshare-all', ...tail('/home/u/proj/src/lib')],
    )
  })

  it('treats a writable / as covering every cwd', () => {
    const args = bwrapArgs({ writable: ['/'], cwd: '/tmp/x', network: 'none' })
    assert.deepEqual(args, [...BASE, '--bind', '/', '/', '--unshare-all', ...tail('/tmp/x')])
  })

  it('ro-binds a cwd that only shares a name prefix with a writable path', () => {
    const args = bwrapArgs({ writable: ['/tmp/job'], cwd: '/tmp/job2', network: 'none' })
    assert.deepEqual(args, [
      ...BASE,
      '--ro-bind',
      '/tmp/job2',
      '/tmp/job2',
      '--bind',
      '/tmp/job',
      '/tmp/job',
      '--unshare-all',
      ...tail('/tmp/job2'),
    ])
  })

  it('ro-binds an uncovered cwd after --tmpfs /tmp so a cwd under /tmp stays visible', () => {
    const args = bwrapArgs({ writable: ['/srv/out'], cwd: '/tmp/work', network: 'none' })
    assert.deepEqual(args, [
      ...BASE,
      '--ro-bind',
      '/tmp/work',
      '/tmp/work',
      '--bind',
      '/srv/out',
      '/srv/out',
      '--unshare-all',
      ...tail('/tmp/work'),
    ])
    const tmpfs = args.indexOf('--tmpfs')
    const cwdBind = args.lastIndexOf('--ro-bind')
    assert.ok(tmpfs >= 0 && cwdBind > tmpfs)
  })

  it('binds a writable path inside an uncovered cwd on top of the read-only cwd', () => {
    const args = bwrapArgs({ writable: ['/tmp/work/out'], cwd: '/tmp/work', network: 'host' })
    assert.deepEqual(args, [
      ...BASE,
      '--ro-bind',
      '/tmp/work',
      '/tmp/work',
      '--bind',
      '/tmp/work/out',
      '/tmp/work/out',
      '--unshare-all',
      '--share-net',
      ...tail('/tmp/work'),
    ])
  })

  it('ends with --chdir cwd so the command can follow', () => {
    const args = bwrapArgs({ writable: [], cwd: '/srv', network: 'none' })
    assert.deepEqual(args.slice(-2), ['--chdir', '/srv'])
  })
})
