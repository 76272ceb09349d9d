import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { LAUNCHER_PATH } from '../../src/host/native.js'
import { execStep, type LauncherSpec, launcherArgv } from '../../src/plan/launcher.js'
import { O_PATH } from '../../src/plan/paths.js'
import { processMounts, ROOT_TMPDIR } from '../../src/plan/process-mounts.js'
import { noLauncher, notRoot, tempDir } from '../helpers.js'

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
      keepFds: [6, 3, 5, 4, 11],
      cwdFd: 11,
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
        keeps: [{ fd: 10, path: '/run/user/1000/work' }],
        proc: true,
        tmpfsBytes: 8192,
        files: [{ path: '/etc/passwd', content: 'root:x:0:0::/:/bin/sh\n' }],
      },
      memfds: [{ fd: 10, content: 'a:b\n' }],
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
      '--keep-fds=3,4,5,6,11',
      '--cwd-fd=11',
      '--cpu=1:2',
      '--fsize=1024',
      '--join=/sys/fs/cgroup/memory/cordon-1-a/tasks',
      '--join=/sys/fs/cgroup/pids/cordon-1-a/tasks',
      '--unshare-net',
      '--unshare-ipc',
      '--mount-ns',
      '--keep-fd=10:/run/user/1000/work',
      '--empty=/run',
      '--tmpfs=/run/cordon',
      '--tmpfs-size=8192',
      '--proc',
      '--ro-bind-data=/etc/passwd:root:x:0:0::/:/bin/sh\n',
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
      '--memfd=10:a:b\n',
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

  it('staged fds (the namespace tier as root) come before the uid drop', () => {
    const argv = launcherArgv({
      ...base,
      keepFds: [4, 10, 11],
      stageFds: [10, 11],
      drop: { uid: 60001, gid: 60000 },
    })
    assert.deepEqual(argv.slice(2, 6), ['--stage-fd=10', '--stage-fd=11', '--uid=60001', '--gid=60000'])
  })

  it('an empty writable list still turns Landlock on: nothing may be written', () => {
    assert.deepEqual(launcherArgv({ ...base, writable: [] }).slice(2, -2), ['--landlock-fs'])
  })

  it('--own-tmpfs=N right after the scratch it makes a tmpfs of; nothing without a scratch', () => {
    const args = launcherArgv({ ...base, scratch: '/tmp/cordon-tmp-1-x', ownTmpfs: 8192 })
    assert.deepEqual(args.slice(args.indexOf('--mkdir=/tmp/cordon-tmp-1-x'), -2), [
      '--mkdir=/tmp/cordon-tmp-1-x',
      '--own-tmpfs=8192',
    ])
    assert.ok(!launcherArgv({ ...base, ownTmpfs: 8192 }).some((a) => a.startsWith('--own-tmpfs')))
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
      blocked: [],
      writable: [ROOT_TMPDIR, '/dev/shm'],
      proc: true,
      identity: ['/etc/passwd', '/etc/group'],
    })
  })

  it('covers a directory the sandbox uid cannot search above a named path, and shows the path again in it', () => {
    const closed = new Set(['/root', '/srv/x', '/srv/x/p/deep'])
    const m = processMounts({
      ...spec,
      network: 'host',
      shown: ['/root/clone', '/srv/x/p'],
      writable: ['/root/clone/out', '/srv/x/p/deep/w', '/opt/w'],
      searchable: (dir) => !closed.has(dir),
    })
    // /srv/x/p/deep is seen through the kept /srv/x/p (the host's), so it is blocked too (plan.ts refuses
    // that one: the launcher mounts every cover before the kept paths); /opt is open.
    assert.deepEqual(m.blocked, ['/root', '/srv/x', '/srv/x/p/deep'])
    assert.deepEqual(
      m.covers.filter((c) => m.blocked.includes(c.path)),
      m.blocked.map((p) => ({ path: p, empty: true })),
      "empty tmpfs of root's",
    )
    assert.deepEqual(m.keeps, ['/root/clone', '/srv/x/p'])
  })

  it('covers nothing beneath a cover already there (a cwd under /run without the network)', () => {
    const m = processMounts({ ...spec, shown: ['/run/user/0/w'], searchable: (dir) => dir !== '/run/user/0' })
    assert.deepEqual(m.blocked, [])
    assert.deepEqual(m.keeps, ['/run/user/0/w'])
  })

  it("cordon's own /etc/passwd and /etc/group, but a file the policy names writable is the host's", () => {
    assert.deepEqual(processMounts({ ...spec, writable: ['/etc/passwd', '/etc'] }).identity, ['/etc/group'])
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

  it('Landlock rules from judged fds follow the paths; argv[0] for the program comes before --', () => {
    const argv = launcherArgv({
      ...base,
      keepFds: [6, 10, 11],
      writable: ['/tmp/cordon-tmp-x'],
      writableFds: [10, 11],
      argv0: '/venv/bin/python',
      program: ['/usr/bin/python3.11', '-c', 'pass'],
    })
    assert.deepEqual(argv.slice(1), [
      '--keep-fds=6,10,11',
      '--landlock-fs',
      '--landlock-write=/tmp/cordon-tmp-x',
      '--landlock-write-fd=10',
      '--landlock-write-fd=11',
      '--argv0=/venv/bin/python',
      '--',
      '/usr/bin/python3.11',
      '-c',
      'pass',
    ])
  })
})

describe('the launcher binary', { skip: noLauncher }, () => {
  const launch = (args: string[]) => spawnSync(LAUNCHER_PATH, args, { encoding: 'utf8' })

  it('--exec ARGV0 FILE: executes FILE with that argv[0], and nothing else', () => {
    const step = execStep(LAUNCHER_PATH, 'my-name', '/bin/sh').slice(1)
    assert.equal(launch([...step, '-c', 'echo "$0"']).stdout, 'my-name\n')
    assert.equal(launch([...step, '-c', 'echo "$1 $2"', 'zero', 'one', 'two']).stdout, 'one two\n')
    const missing = launch(['--exec', 'a', '/no/such/program'])
    assert.equal(missing.status, 127)
    assert.match(missing.stderr, /cannot execute \/no\/such\/program/)
  })

  it('--argv0: the program runs as the file given, named as asked', () => {
    const r = launch(['--keep-fds=', '--argv0=called-so', '--', '/bin/sh', '-c', 'echo $0'])
    assert.equal(r.stdout, 'called-so\n', r.stderr)
  })

  // bash: dash reads no fd above 9. What is read from the fd itself starts at its offset, as bwrap reads it.
  it('--memfd=N:TEXT: fd N holds TEXT from its start; never a kept fd', () => {
    const r = launch([
      '--keep-fds=',
      '--memfd=10:one\ntwo\n',
      '--memfd=11:x',
      '--',
      '/bin/bash',
      '-c',
      'cat <&10; cat <&11',
    ])
    assert.equal(r.stdout, 'one\ntwo\nx', r.stderr)
    const kept = launch(['--keep-fds=10', '--memfd=10:x', '--', '/bin/true'])
    assert.equal(kept.status, 1)
    assert.match(kept.stderr, /bad argument: --memfd \(an fd that is kept\)/)
  })

  it('--own-tmpfs needs --mkdir, and is for the process tier not as root (no --uid or --mount-ns)', () => {
    for (const args of [
      ['--own-tmpfs=1048576'],
      ['--mkdir=/tmp/x', '--own-tmpfs=1048576', '--uid=1', '--gid=1'],
      ['--mkdir=/tmp/x', '--own-tmpfs=1048576', '--mount-ns'],
    ]) {
      const r = launch(['--keep-fds=', ...args, '--', '/bin/true'])
      assert.equal(r.status, 1, args.join(' '))
      assert.match(
        r.stderr,
        /bad argument: --own-tmpfs needs --mkdir, and no --mount-ns, --uid or --stage-fd/,
      )
    }
  })

  it('--ro-bind-data needs a mount namespace of its own and a tmpfs to make the file in', () => {
    const r = launch(['--keep-fds=', '--ro-bind-data=/etc/passwd:x', '--', '/bin/true'])
    assert.equal(r.status, 1)
    assert.match(r.stderr, /bad argument: --ro-bind-data needs --mount-ns and a --tmpfs/)
  })

  it('--ro-bind-data=PATH:TEXT covers PATH with TEXT, read-only, leaving nothing in the tmpfs', {
    skip: notRoot,
  }, () => {
    const r = launch([
      '--keep-fds=',
      '--mount-ns',
      `--tmpfs=${ROOT_TMPDIR}`,
      '--tmpfs-size=65536',
      '--ro-bind-data=/etc/passwd:only:x:1:1::/:/bin/sh\n',
      '--uid=65534',
      '--gid=65534',
      '--',
      '/bin/sh',
      '-c',
      `cat /etc/passwd; echo x >> /etc/passwd || echo ro; ls -A ${ROOT_TMPDIR}; echo end`,
    ])
    assert.equal(r.stdout, 'only:x:1:1::/:/bin/sh\nro\nend\n', r.stderr)
    assert.notEqual(readFileSync('/etc/passwd', 'utf8'), 'only:x:1:1::/:/bin/sh\n', "the host's is untouched")
  })

  it('--stage-fd: a judged path beneath a 0700 directory reaches the dropped uid as /run/cordon/N', {
    skip: notRoot,
  }, () => {
    const closed = tempDir('cordon-test-stage-', { parent: '/var/lib', mode: 0o700 })
    const file = path.join(closed, 'f')
    writeFileSync(file, 'judged\n', { mode: 0o644 })
    const fd = openSync(file, O_PATH)
    try {
      const stdio = ['ignore', 'pipe', 'pipe', ...Array<'ignore'>(7).fill('ignore'), fd] as const
      const r = spawnSync(
        LAUNCHER_PATH,
        [
          '--keep-fds=10',
          '--stage-fd=10',
          '--uid=65534',
          '--gid=65534',
          '--',
          '/bin/sh',
          '-c',
          `readlink /proc/self/fd/10; cat /proc/self/fd/10; cat ${file} 2>/dev/null || echo denied; ls /run/cordon 2>/dev/null || echo unlisted`,
        ],
        { encoding: 'utf8', stdio: [...stdio] },
      )
      assert.equal(r.stdout, '/run/cordon/0\njudged\ndenied\nunlisted\n', r.stderr)
      const bare = launch(['--keep-fds=', '--stage-fd=10', '--', '/bin/true'])
      assert.match(bare.stderr, /^cordon-launch: bad argument: --stage-fd needs --uid/)
    } finally {
      closeSync(fd)
    }
  })

  it('--cwd-fd=N: the program starts in the directory fd N was opened on, whatever its name now is', () => {
    const judged = tempDir('cordon-test-cwd-judged-')
    const other = tempDir('cordon-test-cwd-other-')
    const fd = openSync(judged, O_PATH)
    try {
      const stdio = ['ignore', 'pipe', 'pipe', ...Array<'ignore'>(7).fill('ignore'), fd] as const
      // Started in `other` (the name a swap would have put there): the judged directory is entered.
      const r = spawnSync(
        LAUNCHER_PATH,
        ['--keep-fds=10', '--cwd-fd=10', '--', '/bin/sh', '-c', 'pwd -P; ls /proc/self/fd'],
        {
          encoding: 'utf8',
          cwd: other,
          stdio: [...stdio],
        },
      )
      assert.equal(r.stdout.split('\n')[0], judged, r.stderr)
      assert.ok(!r.stdout.split('\n').slice(1).includes('10'), 'fd 10 is closed once entered')
      const unkept = launch(['--keep-fds=', '--cwd-fd=10', '--', '/bin/true'])
      assert.match(unkept.stderr, /bad argument: --cwd-fd \(an fd it did not keep\)/)
    } finally {
      closeSync(fd)
    }
  })

  it('an fd argument has one spelling: decimal digits, above stderr; anything else is refused', () => {
    for (const arg of [
      '--keep-fds=3,,4',
      '--keep-fds=4,3',
      '--keep-fds=2',
      '--keep-fds= 3',
      '--keep-fds=3x',
      '--keep-fds=9999999',
      '--memfd=+10:x',
      '--memfd= 10:x',
      '--memfd=10',
      '--stage-fd=2',
      '--cwd-fd=3x',
      '--landlock-write-fd=-4',
      '--keep-fd=0x10:/x',
    ]) {
      const args = arg.startsWith('--keep-fds=') ? [arg] : ['--keep-fds=', arg]
      const r = launch([...args, '--', '/bin/true'])
      assert.equal(r.status, 1, arg)
      assert.match(r.stderr, /^cordon-launch: bad argument: /, arg)
    }
    assert.equal(launch(['--keep-fds=3,4,', '--', '/bin/true']).status, 0)
  })

  it('refuses a --landlock-write-fd it was not given (an fd it did not keep)', () => {
    const r = launch(['--keep-fds=', '--landlock-fs', '--landlock-write-fd=10', '--', '/bin/true'])
    assert.equal(r.status, 1)
    assert.match(r.stderr, /^cordon-launch: landlock: cannot stat fd 10/)
  })
})
