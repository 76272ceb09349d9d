import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type LauncherSpec, launcherArgv } from '../../src/plan/launcher.js'
import { processMounts, ROOT_TMPDIR } from '../../src/plan/process-mounts.js'

const base: LauncherSpec = {
  launcher: '/opt/cordon/native/cordon-launch',
  keepFds: [],
  rlimits: [],
  join: [],
  scratch: null,
  unshareNet: false,
  unshareIpc: false,
  mounts: null,
  drop: null,
  writable: null,
  scope: { signals: false, abstractUnix: false },
  seccomp: null,
  bwrapEnv: false,
  monitor: false,
  killSession: false,
  program: ['/usr/bin/true'],
}

describe('launcherArgv', () => {
  it('nothing asked: the launcher, no fds kept, --, the program', () => {
    assert.deepEqual(launcherArgv(base), [
      '/opt/cordon/native/cordon-launch',
      '--keep-fds=',
      '--',
      '/usr/bin/true',
    ])
  })

  it('everything, in the order the launcher applies it', () => {
    const argv = launcherArgv({
      ...base,
      keepFds: [6, 3, 5, 4],
      rlimits: ['--cpu=1:2', '--fsize=1024'],
      join: ['/sys/fs/cgroup/memory/cordon-1-a/tasks', '/sys/fs/cgroup/pids/cordon-1-a/tasks'],
      scratch: '/tmp/cordon-tmp-x',
      unshareNet: true,
      unshareIpc: true,
      mounts: {
        covers: [
          { path: '/run', empty: true },
          { path: '/run/cordon', empty: false },
        ],
        keeps: ['/run/user/1000/work'],
        proc: true,
        tmpfsBytes: 8192,
      },
      drop: { uid: 60007, gid: 60000 },
      writable: ['/work', '/tmp/cordon-tmp-x', '/dev/null'],
      scope: { signals: true, abstractUnix: true },
      seccomp: Buffer.from([0x06, 0, 0, 0, 0, 0, 0xff, 0x7f]),
      bwrapEnv: true,
      monitor: true,
      killSession: true,
      program: ['/usr/bin/id', '-u', '--', '--uid=0'],
    })
    assert.deepEqual(argv, [
      '/opt/cordon/native/cordon-launch',
      '--keep-fds=3,4,5,6',
      '--cpu=1:2',
      '--fsize=1024',
      '--join=/sys/fs/cgroup/memory/cordon-1-a/tasks',
      '--join=/sys/fs/cgroup/pids/cordon-1-a/tasks',
      '--unshare-net',
      '--unshare-ipc',
      '--mount-ns',
      '--keep=/run/user/1000/work',
      '--empty=/run',
      '--tmpfs=/run/cordon',
      '--tmpfs-size=8192',
      '--proc',
      '--mkdir=/tmp/cordon-tmp-x',
      '--uid=60007',
      '--gid=60000',
      '--landlock-fs',
      '--landlock-write=/work',
      '--landlock-write=/tmp/cordon-tmp-x',
      '--landlock-write=/dev/null',
      '--scope-signals',
      '--scope-abstract-unix',
      '--seccomp=060000000000ff7f',
      '--bwrap-env',
      '--monitor',
      '--kill-session',
      '--',
      '/usr/bin/id',
      '-u',
      '--',
      '--uid=0',
    ])
  })

  it('an empty writable list still turns Landlock on: nothing may be written', () => {
    assert.deepEqual(launcherArgv({ ...base, writable: [] }).slice(2, -2), ['--landlock-fs'])
  })

  it('--kill-session only with --monitor (the process tier, whose monitor leads the session)', () => {
    assert.ok(!launcherArgv({ ...base, killSession: true }).includes('--kill-session'))
  })
})

describe('processMounts (the process tier as root)', () => {
  const spec = { network: 'none', shown: [] as string[], writable: [] as string[], shm: '/dev/shm' } as const

  it('without the network: an empty /run first, then its TMPDIR and /dev/shm of its own, and /proc', () => {
    assert.deepEqual(processMounts(spec), {
      covers: [
        { path: '/run', empty: true },
        { path: ROOT_TMPDIR, empty: false },
        { path: '/dev/shm', empty: false },
      ],
      keeps: [],
      writable: [ROOT_TMPDIR, '/dev/shm'],
      proc: true,
    })
  })

  it("with the host's network /run stays the host's", () => {
    const m = processMounts({ ...spec, network: 'host', shown: ['/run/user/1000/w'] })
    assert.deepEqual(
      m.covers.map((c) => c.path),
      [ROOT_TMPDIR, '/dev/shm'],
    )
    assert.deepEqual(m.keeps, [], 'nothing of it is covered')
  })

  it('shows again what the policy names beneath a cover: outermost only, never a cover itself', () => {
    const m = processMounts({
      ...spec,
      shown: ['/home/u/p', '/run/user/1000/w', '/run', '/dev/shm', '/run/user/1000/w'],
      writable: ['/run/user/1000/w/sub', '/dev/shm/x', '/srv'],
    })
    assert.deepEqual(m.keeps, ['/dev/shm/x', '/run/user/1000/w'])
  })

  it("a cover asked for as writable is the host's (a cwd there is the sandbox's own)", () => {
    const m = processMounts({ ...spec, shown: ['/run'], writable: ['/dev/shm', '/dev/shm/x'] })
    assert.deepEqual(m.keeps, ['/dev/shm'])
  })

  it('a /dev/shm that resolves under /run is mounted after /run', () => {
    const m = processMounts({ ...spec, shm: '/run/shm' })
    assert.deepEqual(
      m.covers.map((c) => c.path),
      ['/run', ROOT_TMPDIR, '/run/shm'],
    )
  })
})
