// The process tier's launcher (native/launch.c), for real: what it sets up before the program runs, and
// how it refuses when it cannot.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { probeCapabilities } from '../../src/host/capabilities.js'
import { run, start } from '../../src/index.js'
import { LANDLOCK_SCOPES } from '../../src/plan/launcher.js'
import { prepare } from '../../src/plan/plan.js'
import { ROOT_TMPDIR } from '../../src/plan/process-mounts.js'
import { HOST_IPC_CALLS, seccompProgram } from '../../src/plan/seccomp.js'
import { parsePolicy } from '../../src/policy/schema.js'
import {
  asUnprivileged,
  marker,
  NOBODY,
  noLauncher,
  notRoot,
  noUnprivileged,
  processesWith,
  tempDir,
  waitFor,
  worldWritableDir,
} from '../helpers.js'

const caps = probeCapabilities()
const LIBRARY = fileURLToPath(new URL('../../dist/index.js', import.meta.url))
const isolation = 'process'
const noLandlock = caps.landlock >= 1 ? false : 'the kernel offers no Landlock'
const noScopes =
  caps.landlock >= LANDLOCK_SCOPES
    ? false
    : `Landlock ABI ${caps.landlock} has no scopes (needs 6, Linux 6.12)`
const noCgroup = caps.cgroup.version === null ? `no usable cgroup: ${caps.cgroup.reason}` : false

/** Run python in the process tier; `code` prints what the test asserts on. */
const python = (code: string, options: Parameters<typeof run>[1] = {}) =>
  run(['python3', '-c', code], { isolation, ...options })

/**
 * Makes a SysV shared memory segment, semaphore set and message queue and a POSIX message queue; prints
 * the errno of each (0: made, and removed again at once so that the test leaves nothing behind).
 */
const IPC_PROBE = `
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
L = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *[a if isinstance(a, bytes) else L(a) for a in args])
    return r, ctypes.get_errno()
out = {}
r, e = call(29, 0, 4096, 0o1600); out['shmget'] = e if r == -1 else 0
if r >= 0: call(31, r, 0, 0)
r, e = call(64, 0, 1, 0o1600); out['semget'] = e if r == -1 else 0
if r >= 0: call(66, r, 0, 0, 0)
r, e = call(68, 0, 0o1600); out['msgget'] = e if r == -1 else 0
if r >= 0: call(71, r, 0, 0)
name = b'cordon-ipc-%d' % os.getpid()
r, e = call(240, name, os.O_CREAT | os.O_RDWR, 0o600, 0); out['mq_open'] = e if r == -1 else 0
if r >= 0: call(241, name); os.close(r)
print(json.dumps(out))
`

// Without a uid or cgroup of its own the sandbox's session is all that marks its processes, so leaving it
// must be impossible: a setsid'd child holding the output pipes kept run() open until it exited.
describe('process tier without a uid or cgroup of its own', { skip: noLauncher }, () => {
  it('its filter refuses setsid only then', {
    skip: caps.seccompArch ? false : 'no seccomp filter here',
  }, () => {
    const filter = (cgroup: 'auto' | 'off', isRoot: boolean) => {
      const prepared = prepare(['true'], parsePolicy({ isolation, cgroup: { mode: cgroup } }), {
        ...caps,
        isRoot,
      })
      if (prepared.kind !== 'launch') assert.fail(prepared.violation.message)
      prepared.plan.lease?.release()
      return prepared.plan.seccomp
    }
    const withSetsid = seccompProgram(caps.seccompArch!, {
      extraDenied: ['setsid', ...HOST_IPC_CALLS],
      socketFamilies: [1],
      // The host's uid: limits and priority of itself only.
      selfOnly: true,
    })
    assert.deepEqual(filter('off', false), withSetsid)
    assert.notDeepEqual(filter('off', true), withSetsid, 'a uid of its own marks the sandbox')
    if (caps.cgroup.version !== null)
      assert.notDeepEqual(filter('auto', false), withSetsid, 'so does a cgroup')
  })

  it('refuses setsid, so nothing leaves the session and the run ends with its program', {
    skip: noUnprivileged(),
  }, async () => {
    const m = marker()
    const script = [
      `setsid sleep ${m} & setsid sleep ${m} >/dev/null 2>&1 &`,
      `python3 -c 'import os; os.setsid()' 2>/dev/null || echo setsid-refused`,
      `(sleep ${m} &)`,
      'echo done',
    ].join('\n')
    type Out = { status: string; stdout: string; stderr: string; ms: number }
    const out = await asUnprivileged<Out>(
      `
      const t = performance.now()
      const r = await run(['sh', '-c', ${JSON.stringify(script)}], {
        isolation: 'process', cgroup: { mode: 'off' }, limits: { wallTimeMs: 20000 },
      })
      return { status: r.status, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - t }
    `,
      15_000,
    )
    assert.equal(out.status, 'ok', JSON.stringify(out))
    assert.equal(out.stdout, 'setsid-refused\ndone\n')
    assert.ok(out.ms < 5000, `run() took ${Math.round(out.ms)} ms: it waited for an escapee`)
    assert.deepEqual(processesWith(m), [], 'nothing of the sandbox is left')
  })
})

describe('process tier launcher', { skip: noLauncher }, () => {
  it('as root it has an IPC namespace of its own: SysV IPC and message queues work there', {
    skip: notRoot,
  }, async () => {
    const r = await python(IPC_PROBE)
    assert.equal(r.status, 'ok', r.stderr)
    const made = JSON.parse(r.stdout) as Record<string, number>
    // Landlock refuses making a queue (EACCES: a file outside the writable paths) where the kernel has it.
    assert.ok([0, 13].includes(made.mq_open!), `mq_open: ${made.mq_open}`)
    assert.deepEqual({ ...made, mq_open: 0 }, { shmget: 0, semget: 0, msgget: 0, mq_open: 0 })
  })

  it('SysV shared memory the sandbox makes dies with it (an IPC namespace of its own)', {
    skip: notRoot,
  }, async () => {
    // Columns of /proc/sysvipc/shm: key shmid perms size cpid lpid nattch uid ...
    const poolSegments = () =>
      readFileSync('/proc/sysvipc/shm', 'utf8')
        .split('\n')
        .slice(1)
        .map((line) => line.trim().split(/\s+/))
        .filter((cols) => Number(cols[7]) >= 60000 && Number(cols[7]) < 61000)
        .map((cols) => cols[1])
    const before = new Set(poolSegments())
    const r = await run(['sh', '-c', 'ipcmk -M 1048576 && ipcs -m | grep -c 0x'], { isolation })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout.trim().split('\n').at(-1), '1', 'the sandbox sees only its own segment')
    const left = poolSegments().filter((id) => !before.has(id))
    assert.deepEqual(left, [], 'no segment of a sandbox uid is left on the host')
  })

  it('the program starts with no_new_privs and the seccomp filter, as the sandbox uid', {
    skip: notRoot,
  }, async () => {
    const r = await run(['sh', '-c', 'id -u; grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status'], {
      isolation,
    })
    const [uid, nnp, seccomp] = r.stdout.trim().split('\n')
    assert.ok(Number(uid) >= 60000 && Number(uid) < 61000, `uid ${uid}`)
    assert.match(nnp ?? '', /NoNewPrivs:\s+1/)
    assert.match(seccomp ?? '', /Seccomp:\s+2/)
  })

  it('joins its own cgroup before the program runs', { skip: noCgroup }, async () => {
    const r = await run(['cat', '/proc/self/cgroup'], { isolation })
    const line = r.stdout.split('\n').find((l) => /(^0::|:memory:)/.test(l)) ?? ''
    assert.match(line, /\/cordon-\d+-[0-9a-f]{8}$/, `memory cgroup line: ${line}`)
  })

  it('writes only to writable paths, its own TMPDIR and /dev/null', { skip: noLandlock }, async () => {
    const mine = worldWritableDir()
    const other = worldWritableDir() // world-writable, but not the sandbox's: Landlock, not modes, refuses
    const script = [
      `echo a > ${mine}/f && echo mine-ok`,
      `echo b > ${other}/f 2>/dev/null || echo other-refused`,
      `mkdir ${other}/d 2>/dev/null || echo mkdir-refused`,
      'echo c > "$TMPDIR/f" && echo tmp-ok',
      'echo d > /dev/null && echo null-ok',
      '[ "$HOME" = "$TMPDIR" ] && echo home-is-tmp',
      'echo "$TMPDIR"',
    ].join('; ')
    const r = await run(['sh', '-c', script], { isolation, writable: [mine] })
    const lines = r.stdout.trim().split('\n')
    assert.deepEqual(lines.slice(0, -1), [
      'mine-ok',
      'other-refused',
      'mkdir-refused',
      'tmp-ok',
      'null-ok',
      'home-is-tmp',
    ])
    assert.equal(existsSync(path.join(other, 'f')), false, 'nothing written outside')
    const tmp = lines.at(-1)!
    if (caps.isRoot) {
      // A tmpfs in its own mount namespace, over a root-only directory: nothing of it on the host.
      assert.equal(tmp, ROOT_TMPDIR)
      assert.equal(existsSync(path.join(tmp, 'f')), false, 'on the host')
    } else {
      // Named after its owner, so a cordon that dies mid-run leaves it for the next one to remove.
      assert.ok(tmp.startsWith(path.join(os.tmpdir(), `cordon-tmp-${process.pid}-`)), `TMPDIR ${tmp}`)
      assert.equal(existsSync(tmp), false, 'the private TMPDIR is gone after the run')
    }
  })

  it("the private TMPDIR is the sandbox uid's alone and is removed with what it holds", async () => {
    const r = await run(
      [
        'sh',
        '-c',
        'mkdir -p "$TMPDIR/a/b" && echo x > "$TMPDIR/a/b/c" && stat -c "%a %u" "$TMPDIR" && echo "$TMPDIR"',
      ],
      { isolation },
    )
    const [modeOwner, tmp] = r.stdout.trim().split('\n')
    const [mode, owner] = (modeOwner ?? '').split(' ')
    assert.equal(mode, '700')
    if (caps.isRoot) assert.ok(Number(owner) >= 60000, `owned by the sandbox uid, not ${owner}`)
    // As root the host side is only the (shared, root-only) mount point.
    assert.equal(existsSync(caps.isRoot ? path.join(tmp!, 'a') : tmp!), false, `${tmp} removed`)
  })

  it("a launcher's refusal is an `error` read from its refusal pipe; the program's stderr stays empty", {
    skip: noUnprivileged(),
  }, () => {
    // A host (not root: as root TMPDIR is a tmpfs of the sandbox's own) whose TMPDIR does not exist: the
    // launcher cannot make the run's private TMPDIR there.
    const host = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { run } from ${JSON.stringify(LIBRARY)}
const r = await run(['true'], { isolation: 'process' })
process.stdout.write(JSON.stringify(r))`,
      ],
      {
        encoding: 'utf8',
        cwd: '/',
        env: { ...process.env, TMPDIR: '/nonexistent-cordon-tmp' },
        timeout: 20_000,
        ...(caps.isRoot ? NOBODY : {}),
      },
    )
    assert.equal(host.status, 0, host.stderr)
    const r = JSON.parse(host.stdout) as Awaited<ReturnType<typeof run>>
    assert.equal(r.status, 'error', JSON.stringify(r))
    assert.equal(r.violation?.limit, 'launch')
    assert.match(
      r.violation?.message ?? '',
      /^cordon-launch: cannot make \/nonexistent-cordon-tmp\/cordon-tmp-/,
    )
    assert.equal(r.stderr, '')
  })

  it('a program whose exec fails after every check passed keeps its exit (127), with the reason on stderr', async () => {
    const dir = worldWritableDir()
    const script = path.join(dir, 'script')
    writeFileSync(script, '#!/nonexistent/interpreter\n', { mode: 0o755 })
    const r = await run([script], { isolation })
    assert.equal(r.status, 'nonzero-exit', JSON.stringify(r))
    assert.equal(r.exitCode, 127)
    assert.match(r.stderr, /^cordon-launch: cannot execute .*script: No such file or directory\n$/)
  })

  it('TMPDIR and HOME given in env are kept', async () => {
    const home = worldWritableDir()
    const r = await run(['sh', '-c', 'echo "$HOME $TMPDIR"'], {
      isolation,
      env: { HOME: home, TMPDIR: home },
    })
    assert.equal(r.stdout, `${home} ${home}\n`)
  })

  it("network 'none': sockets of every family but unix are refused; 'host' allows them", async () => {
    const probe = [
      'import socket',
      'for fam in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):',
      '  try:',
      '    socket.socket(getattr(socket, fam), socket.SOCK_RAW if fam in ("AF_NETLINK", "AF_PACKET") else socket.SOCK_STREAM).close(); print(fam, "ok")',
      '  except OSError as e: print(fam, e.errno)',
      'socket.socket(socket.AF_UNIX).close(); print("AF_UNIX ok")',
      'a, b = socket.socketpair(); print("socketpair ok")',
    ].join('\n')
    const none = await python(probe)
    assert.deepEqual(none.stdout.trim().split('\n'), [
      'AF_INET 97',
      'AF_INET6 97',
      'AF_NETLINK 97',
      'AF_PACKET 97',
      'AF_UNIX ok',
      'socketpair ok',
    ])
    const host = await python('import socket\nsocket.socket(socket.AF_INET).close()\nprint("inet ok")', {
      network: 'host',
    })
    assert.equal(host.stdout, 'inet ok\n')
  })

  it("cannot reach the host's abstract unix sockets unless the network is 'host'", {
    skip: noScopes,
  }, async () => {
    const name = `cordon-test-${process.pid}-${Date.now()}`
    const server = net.createServer((s) => s.end('reached\n'))
    await new Promise<void>((r) => server.listen(`\0${name}`, r))
    // Node 20 binds an abstract name padded with NULs to the whole sun_path (108 bytes), Node 24 the name
    // alone: try both, and report the answer of the one that exists (a name nobody bound is ECONNREFUSED).
    const probe = [
      'import socket',
      `names = ["\\0${name}", "\\0${name}".ljust(108, "\\0")]`,
      'answer = "refused 111"',
      'for n in names:',
      '  s = socket.socket(socket.AF_UNIX)',
      '  try:',
      '    s.connect(n); answer = s.recv(9).decode().strip(); break',
      '  except OSError as e:',
      '    if e.errno != 111: answer = f"refused {e.errno}"; break',
      'print(answer)',
    ].join('\n')
    try {
      const none = await python(probe)
      assert.equal(none.stdout, 'refused 1\n', none.stderr)
      const host = await python(probe, { network: 'host' })
      assert.equal(host.stdout, 'reached\n', host.stderr)
    } finally {
      server.close()
    }
  })

  it('cannot signal a process outside the sandbox, even one of its own uid', {
    skip: noScopes || notRoot || noCgroup,
  }, async () => {
    // A pool of one uid: the outside process has exactly the sandbox's uid, so only Landlock stands between.
    const pool = { first: 60_990, count: 1, lockDir: tempDir('cordon-uids-') }
    const outside = spawn('sleep', ['30'], { uid: pool.first, gid: pool.first, stdio: 'ignore' })
    try {
      const r = await run(['sh', '-c', `kill -TERM ${outside.pid} 2>&1; echo rc=$?; id -u`], {
        isolation,
        uidPool: pool,
      })
      assert.match(r.stdout, /Operation not permitted[\s\S]*rc=1\n60990\n$/, r.stdout)
      assert.equal(outside.exitCode, null, 'the outside process lives')
      assert.equal(outside.signalCode, null, 'the outside process lives')
    } finally {
      outside.kill('SIGKILL')
    }
  })

  it('the filter refuses denySyscalls in this tier too', async () => {
    const r = await run(['sh', '-c', 'mkdir "$TMPDIR/d" 2>&1 || echo refused'], {
      isolation,
      denySyscalls: ['mkdir', 'mkdirat'],
    })
    assert.match(r.stdout, /Operation not permitted[\s\S]*refused/)
  })

  it('without the launcher either tier is refused, saying how to build it', () => {
    for (const tier of ['process', 'namespace', 'auto'] as const) {
      const prepared = prepare(['true'], parsePolicy({ isolation: tier }), { ...caps, launcher: null })
      assert.ok(prepared.kind === 'refused', `${tier}: refused`)
      assert.equal(prepared.violation.kind, 'error')
      assert.match(prepared.violation.message, /tier unavailable: cordon's launcher is not built .*gcc/)
    }
  })
})

describe('the launcher binary', { skip: noLauncher }, () => {
  // As cordon runs it: fd 4 is the refusal pipe, kept (the option itself is tested below).
  const launch = (...args: string[]) => {
    const r = spawnSync(caps.launcher!, ['--keep-fds=4', ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe', 'ignore', 'pipe'],
    })
    return { ...r, refusal: String(r.output[4] ?? '') }
  }

  it('refuses what it does not know, naming it on its refusal pipe, exit 1', () => {
    for (const [args, message] of [
      [['--bogus', '--', 'true'], 'bad argument: --bogus'],
      [['--cpu=abc', '--', 'true'], 'bad argument: --cpu=abc'],
      [['--cpu=5:1', '--', 'true'], 'bad argument: --cpu=5:1'],
      [['--uid=60000', '--', 'true'], '--uid and --gid go together'],
      [['--uid=60000:1', '--gid=60000', '--', 'true'], 'bad argument: --uid=60000:1'],
      [['--seccomp=zz', '--', 'true'], 'bad argument: --seccomp'],
      [['--seccomp=0600', '--', 'true'], 'not whole instructions'],
      [['--landlock-write=/tmp', '--', 'true'], '--landlock-write needs --landlock-fs'],
      [['--join=relative/tasks', '--', 'true'], 'bad argument: --join=relative/tasks'],
      [['--'], 'no program'],
      [['--keep-fds=2', '--', 'true'], 'bad argument: --keep-fds=2'],
      [['--keep-fds=6,5', '--', 'true'], 'bad argument: --keep-fds=6,5'],
      [['--keep-fds=5x', '--', 'true'], 'bad argument: --keep-fds=5x'],
      [['--kill-session', '--', 'true'], '--kill-session needs --monitor'],
      [['--tag=0a1b', '--', 'true'], 'bad argument: --tag=0a1b'],
    ] as const) {
      const r = launch(...args)
      assert.equal(r.status, 1, `${args.join(' ')}: ${r.refusal}`)
      assert.match(
        r.refusal,
        new RegExp(`^cordon-launch: .*${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
      )
      assert.equal(r.stderr, '', "never on stderr, which is the program's")
    }
  })

  it('says nothing on its refusal pipe when it runs the program, which never holds that pipe', () => {
    const r = launch(
      '--',
      '/bin/sh',
      '-c',
      'echo "cordon-launch: forged" >&4 || echo refused; ls /proc/self/fd',
    )
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.refusal, '')
    assert.match(r.stdout, /^refused\n/)
    assert.doesNotMatch(r.stdout, /^4$/m, 'fd 4 is closed in the program')
    const monitored = launch(
      '--monitor',
      '--',
      '/bin/sh',
      '-c',
      'echo forged > /proc/$PPID/fd/4 || echo refused',
    )
    assert.equal(monitored.refusal, '', 'the monitor holds no fd 4 either')
    assert.match(monitored.stdout, /refused/)
  })

  it('run by hand without a kept fd 4, it says why on stderr', () => {
    const r = spawnSync(caps.launcher!, ['--keep-fds=', '--bogus', '--', 'true'], { encoding: 'utf8' })
    assert.equal(r.status, 1)
    assert.match(r.stderr, /^cordon-launch: bad argument: --bogus/)
  })

  it('--monitor: stays as the parent of the program, which it runs in a child, and passes on how it ended', () => {
    const ppid = launch('--monitor', '--', '/bin/sh', '-c', 'echo $PPID')
    assert.equal(ppid.status, 0, ppid.stderr)
    assert.equal(Number(ppid.stdout), ppid.pid, 'the launched pid is the monitor, the parent of the program')
    assert.equal(launch('--monitor', '--', '/bin/sh', '-c', 'exit 7').status, 7)
    const term = launch('--monitor', '--', '/bin/sh', '-c', 'kill -TERM $$')
    assert.deepEqual([term.status, term.signal], [null, 'SIGTERM'], 'an ordinary signal as itself')
    const rt = launch('--monitor', '--', '/usr/bin/python3', '-c', 'import os; os.kill(os.getpid(), 35)')
    assert.equal(rt.status, 128 + 35, 'a real-time signal, which Node cannot name, as 128+N')
    const refused = launch('--monitor', '--mkdir=relative', '--', '/bin/true')
    assert.equal(refused.status, 1)
    assert.match(refused.refusal, /^cordon-launch: bad argument: --mkdir=relative/)
    const missing = launch('--monitor', '--', '/no/such/program')
    assert.equal(missing.status, 127, missing.refusal)
    assert.match(missing.refusal, /^cordon-launch: cannot execute \/no\/such\/program/)
  })

  it('--kill-session: the monitor kills what is left of its session when the program ends', async () => {
    for (const sweep of [true, false]) {
      const m = marker()
      const script = `sleep ${m} >/dev/null 2>&1 & (sleep ${m} >/dev/null 2>&1 &); sleep 0.2; exit 3`
      const args = [
        '--keep-fds=',
        '--monitor',
        ...(sweep ? ['--kill-session'] : []),
        '--',
        '/bin/sh',
        '-c',
        script,
      ]
      // Detached: the launcher leads a session of its own, as cordon starts it.
      const child = spawn(caps.launcher!, args, { detached: true, stdio: 'ignore' })
      const [code] = (await once(child, 'exit')) as [number | null]
      assert.equal(code, 3, "the program's exit is passed on")
      if (sweep) {
        assert.deepEqual(processesWith(`sleep ${m}`), [], 'nothing of its session is left')
      } else {
        assert.ok(await waitFor(() => processesWith(`sleep ${m}`).length === 2, 5000), 'without it they stay')
        for (const pid of processesWith(`sleep ${m}`)) process.kill(pid, 'SIGKILL')
      }
    }
  })

  it('refuses mounts without --mount-ns, and a --keep-fd beneath no cover', () => {
    for (const [args, message] of [
      [['--tmpfs=/run/cordon', '--', 'true'], 'need --mount-ns'],
      [['--proc', '--', 'true'], 'need --mount-ns'],
      [['--mount-ns', '--tmpfs=/run/cordon', '--', 'true'], 'need --uid and --tmpfs-size'],
      [
        ['--mount-ns', '--uid=60000', '--gid=60000', '--tmpfs-size=1024', '--tmpfs=/', '--', 'true'],
        '--tmpfs=/',
      ],
      [
        [
          '--mount-ns',
          '--uid=60000',
          '--gid=60000',
          '--tmpfs-size=1024',
          '--empty=/run',
          '--keep-fd=10:/home',
          '--',
          'true',
        ],
        'beneath no --tmpfs or --empty',
      ],
    ] as const) {
      const r = launch(...args)
      assert.equal(r.status, 1, `${args.join(' ')}: ${r.refusal}`)
      assert.match(
        r.refusal,
        new RegExp(`^cordon-launch: bad argument: .*${message.replace(/[-/]/g, '\\$&')}`),
      )
    }
  })

  it('--remove-tree: removes a tree of its own uid, never following a symlink in it', () => {
    // As an unprivileged uid (nobody when the tests run as root), which permissions bind.
    const as = caps.isRoot ? { uid: 65534, gid: 65534 } : {}
    const dir = tempDir('cordon-rm-', { mode: 0o777 })
    const outside = tempDir('cordon-outside-', { mode: 0o777 })
    writeFileSync(path.join(outside, 'kept'), 'x')
    const tree = path.join(dir, 'tree')
    let deep = tree
    for (let i = 0; i < 300; i++) deep = path.join(deep, 'd') // deeper than it holds fds for
    mkdirSync(deep, { recursive: true })
    writeFileSync(path.join(deep, 'f'), 'x')
    symlinkSync(outside, path.join(tree, 'link'))
    symlinkSync(outside, path.join(tree, 'd', 'link'))
    spawnSync('mkfifo', [path.join(tree, 'fifo')])
    mkdirSync(path.join(tree, 'locked', 'in'), { recursive: true })
    writeFileSync(path.join(tree, 'locked', 'in', 'f'), 'x')
    if (caps.isRoot) spawnSync('chown', ['-hR', '65534:65534', tree])
    // Its owner took every permission away: its owner may give them back, and the remover does.
    spawnSync('chmod', ['000', path.join(tree, 'locked', 'in'), path.join(tree, 'locked'), tree])
    const r = spawnSync(caps.launcher!, [`--remove-tree=${tree}`], { encoding: 'utf8', ...as })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(existsSync(tree), false)
    assert.deepEqual(readdirSync(outside), ['kept'], 'beyond a symlink')
    assert.equal(spawnSync(caps.launcher!, [`--remove-tree=${tree}`]).status, 0, 'gone already is done')
  })

  it('--remove-tree: a symlink goes as itself; refuses a relative path and a directory of another uid', () => {
    const dir = tempDir('cordon-rm-', { mode: 0o755 })
    const outside = tempDir('cordon-outside-')
    writeFileSync(path.join(outside, 'kept'), 'x')
    symlinkSync(outside, path.join(dir, 'link'))
    const refused = (p: string) => spawnSync(caps.launcher!, [`--remove-tree=${p}`], { encoding: 'utf8' })
    assert.equal(refused(`${dir}/link/.`).status, 1)
    assert.equal(refused('relative/path').status, 1)
    assert.equal(refused(path.join(dir, 'link')).status, 0)
    assert.equal(existsSync(path.join(dir, 'link')), false, 'the symlink itself is gone')
    assert.deepEqual(readdirSync(outside), ['kept'], 'what it pointed to is not touched')
    if (caps.isRoot) {
      const foreign = path.join(dir, 'foreign')
      mkdirSync(path.join(foreign, 'sub'), { recursive: true })
      spawnSync('chown', ['-R', '65534:65534', foreign])
      const r = refused(foreign)
      assert.equal(r.status, 1)
      assert.match(r.stderr, /cannot remove .*foreign: Operation not permitted/)
      assert.equal(existsSync(path.join(foreign, 'sub')), true)
      // --remove-tree-any (root only): another uid's tree goes too, its links still as themselves.
      symlinkSync(outside, path.join(foreign, 'sub', 'out'))
      spawnSync('chown', ['-h', '65534:65534', path.join(foreign, 'sub', 'out')])
      const any = spawnSync(caps.launcher!, [`--remove-tree-any=${foreign}`], { encoding: 'utf8' })
      assert.equal(any.status, 0, any.stderr)
      assert.equal(existsSync(foreign), false)
      assert.deepEqual(readdirSync(outside), ['kept'])
    } else {
      const any = spawnSync(caps.launcher!, [`--remove-tree-any=${dir}`], { encoding: 'utf8' })
      assert.match(any.stderr, /for root only/)
    }
  })

  it('requires --keep-fds: which inherited fds survive is never left to chance', () => {
    const r = spawnSync(caps.launcher!, ['--', '/bin/true'], { encoding: 'utf8' })
    assert.equal(r.status, 1)
    assert.match(r.stderr, /^cordon-launch: bad argument: --keep-fds is required/)
  })

  it('closes every inherited fd above stderr but the ones it keeps', () => {
    const probe = 'for f in 3 4 5 6 9 30; do [ -e /proc/self/fd/$f ] && echo $f; done; true'
    const stdio = [
      'ignore',
      'pipe',
      'pipe',
      'pipe',
      'pipe',
      'pipe',
      'pipe',
      'ignore',
      'ignore',
      'pipe',
    ] as const
    const r = spawnSync(caps.launcher!, ['--keep-fds=5,6', '--', '/bin/sh', '-c', probe], {
      encoding: 'utf8',
      stdio: [...stdio, ...Array(20).fill('ignore'), 'pipe'],
    })
    assert.equal(r.stdout, '5\n6\n', r.stderr)
  })

  it('a set-up step that fails stops before the program, exit 1', () => {
    const dir = worldWritableDir()
    for (const args of [
      ['--join=/nonexistent/tasks', '--', 'sh', '-c', 'echo ran'],
      [`--mkdir=${dir}`, '--', 'sh', '-c', 'echo ran'], // exists: never reused
    ]) {
      const r = launch(...args)
      assert.equal(r.status, 1, r.refusal)
      assert.equal(r.stdout, '', 'the program never ran')
      assert.match(r.refusal, /^cordon-launch: cannot (open|make)/)
    }
  })

  it('a program it cannot execute: 127 when missing, 126 otherwise, like a shell (no PATH lookup)', () => {
    assert.equal(launch('--', 'true').status, 127, 'cordon passes resolved paths only')
    const missing = launch('--', '/nonexistent/program')
    assert.equal(missing.status, 127)
    assert.match(missing.refusal, /^cordon-launch: cannot execute \/nonexistent\/program: No such file/)
    assert.equal(launch('--', os.tmpdir()).status, 126)
  })

  it("applies rlimits in prlimit's syntax", () => {
    const r = launch('--cpu=3:4', '--fsize=1048576', '--', '/bin/cat', '/proc/self/limits')
    assert.match(r.stdout, /Max cpu time\s+3\s+4\s+seconds/)
    assert.match(r.stdout, /Max file size\s+1048576\s+1048576\s+bytes/)
  })

  // The monitor stays outside the sandbox, as the program's parent that cleans up after it: the sandbox's
  // rlimits (CPU time, open files, file size...) bound the program, never the monitor.
  it("with --monitor the rlimits are the program's, never the monitor's", () => {
    const limits = (text: string) =>
      new Map(
        text
          .split('\n')
          .filter((line) => line.startsWith('Max '))
          .map((line) => [line.slice(0, 26).trim(), line.slice(26).trim()] as const),
      )
    const host = limits(readFileSync('/proc/self/limits', 'utf8'))
    const r = launch(
      '--monitor',
      '--cpu=5:6',
      '--fsize=4096',
      '--core=4096',
      '--data=1073741824',
      '--nofile=64',
      '--',
      '/bin/sh',
      '-c',
      'cat /proc/$PPID/limits; echo ---; cat /proc/self/limits',
    )
    assert.equal(r.status, 0, r.refusal)
    const [monitor, program] = r.stdout.split('---\n').map(limits)
    const sandbox = {
      'Max cpu time': /^5\s+6\s+seconds$/,
      'Max file size': /^4096\s+4096\s+bytes$/,
      'Max core file size': /^4096\s+4096\s+bytes$/,
      'Max data size': /^1073741824\s+1073741824\s+bytes$/,
      'Max open files': /^64\s+64\s+files$/,
    }
    for (const [name, value] of Object.entries(sandbox)) {
      assert.match(program!.get(name) ?? '', value, `the program's ${name}`)
      assert.equal(monitor!.get(name), host.get(name), `the monitor's ${name} is the host's`)
    }
    // Set in the child now: one the kernel refuses (past fs.nr_open, even for root) is still a refusal.
    const refused = launch('--monitor', '--nofile=4294967296', '--', '/bin/true')
    assert.equal(refused.status, 1)
    assert.match(refused.refusal, /^cordon-launch: setrlimit --nofile=4294967296: /)
  })

  it('dies with its parent (parent-death SIGKILL survives the exec)', async () => {
    const marker = `${90 + Math.random()}`
    const running = () =>
      spawnSync('pgrep', ['-f', `sleep ${marker}`], { encoding: 'utf8' }).stdout.trim() !== ''
    // The launcher's parent is a shell that waits a moment, then exits without waiting for it.
    const parent = spawn('sh', ['-c', `${caps.launcher} --keep-fds= -- /bin/sleep ${marker} & sleep 1`], {
      stdio: 'ignore',
    })
    const exited = new Promise((r) => parent.on('exit', r))
    assert.ok(await waitFor(running, 5000), 'the program started')
    await exited
    assert.ok(await waitFor(() => !running(), 5000), 'the program died with its parent')
  })

  it('prints the Landlock ABI it finds', () => {
    const r = spawnSync(caps.launcher!, ['--landlock-abi'], { encoding: 'utf8' })
    assert.equal(r.status, 0)
    assert.equal(Number(r.stdout), caps.landlock)
    assert.ok(readFileSync('/proc/version', 'utf8').length > 0, 'sanity')
  })
})

// As root the process tier's child unshares a mount namespace: its TMPDIR and /dev/shm are tmpfs of
// tmpfsBytes (RAM, charged to its cgroup, gone with it), its /proc shows only its own processes, and
// without the network its /run is empty but for the paths the policy names.
describe('process tier as root: mounts of its own', { skip: noLauncher || notRoot }, () => {
  it('TMPDIR and /dev/shm are bounded by tmpfsBytes: past it ENOSPC, and nothing lands on the host', async () => {
    const name = `big-${randomUUID()}`
    const fill = `
import errno, os, sys
def fill(d):
    try:
        with open(os.path.join(d, ${JSON.stringify(name)}), "wb") as f:
            for _ in range(64):
                f.write(bytes(1 << 20))
        return "wrote 64M"
    except OSError as e:
        return errno.errorcode[e.errno]
print(os.environ["TMPDIR"], fill(os.environ["TMPDIR"]), fill("/dev/shm"), sep="|", flush=True)
sys.stdin.readline()
sys.exit(3)
`
    const handle = start(['python3', '-c', fill], { isolation, limits: { tmpfsBytes: '8M' } })
    let seen = ''
    for await (const chunk of handle.output) {
      seen += chunk.data
      if (seen.includes('\n')) break
    }
    const [tmp, inTmp, inShm] = seen.trim().split('|')
    // While the sandbox still holds its files: none of them is on the host.
    const onHost = [path.join(tmp!, name), path.join('/dev/shm', name)].filter((p) => existsSync(p))
    handle.closeStdin()
    const r = await handle.result
    assert.deepEqual([inTmp, inShm], ['ENOSPC', 'ENOSPC'], r.stderr)
    assert.deepEqual(onHost, [], 'written to the host')
    assert.equal(r.status, 'nonzero-exit', "the program's own exit")
    assert.equal(r.exitCode, 3)
    assert.deepEqual(
      r.perProcessLimits,
      caps.cgroup.version === null ? ['cpuTimeMs', 'memoryBytes', 'maxProcesses'] : [],
    )
  })

  it("sees only its own processes: no other run's or host process's argv, not its monitor's", async () => {
    const secret = `DB_PASSWORD=${randomUUID()}`
    // Stand-ins for `cordon run --env DB_PASSWORD=...` (root), a process of another user, another run.
    const holders = [
      spawn('sh', ['-c', 'sleep 60; true', secret], { stdio: 'ignore' }),
      spawn('sh', ['-c', 'sleep 60; true', secret], { stdio: 'ignore', uid: 65534, gid: 65534 }),
    ]
    const other = start(['sh', '-c', 'sleep 60; true', secret], { isolation })
    const probe = `
import json, os, subprocess
secret, mine = os.environ["PROBE"].encode(), os.getuid()
pids = [p for p in os.listdir("/proc") if p.isdigit()]
found, others = [], []
for p in pids:
    try:
        if secret in open("/proc/%s/cmdline" % p, "rb").read():
            found.append(p)
        uid = next(l for l in open("/proc/%s/status" % p) if l.startswith("Uid:")).split()[1]
        if int(uid) != mine:
            others.append(p)
    except OSError:
        pass
try:
    monitor = open("/proc/%d/cmdline" % os.getppid(), "rb").read().decode(errors="replace")
except OSError as e:
    monitor = "hidden"
ps = subprocess.run(["ps", "-eo", "uid="], capture_output=True, text=True).stdout.split()
print(json.dumps({"found": found, "others": others, "self": str(os.getpid()) in pids,
    "monitor": monitor, "psUids": sorted(set(ps)), "mine": str(mine)}))
`
    try {
      assert.ok(await waitFor(() => processesWith(secret).length >= 3, 10_000), 'the holders started')
      const r = await run(['python3', '-c', probe], { isolation, env: { PROBE: secret } })
      assert.equal(r.status, 'ok', r.stderr)
      const seen = JSON.parse(r.stdout) as {
        found: string[]
        others: string[]
        self: boolean
        monitor: string
        psUids: string[]
        mine: string
      }
      assert.deepEqual(seen.found, [], 'a secret in another argv')
      assert.deepEqual(seen.others, [], "another uid's processes are listed")
      assert.equal(seen.self, true, 'it sees itself')
      assert.equal(seen.monitor, 'hidden', "its monitor's argv (the run's tag) is readable")
      assert.deepEqual(seen.psUids, [seen.mine], 'ps shows its own processes only')
      const node = await run(
        ['node', '-e', 'console.log(process.pid > 0, require("os").cpus().length > 0)'],
        {
          isolation,
        },
      )
      assert.equal(node.stdout, 'true true\n', node.stderr)
    } finally {
      for (const h of holders) h.kill('SIGKILL')
      other.kill()
      await other.result
    }
  })

  it("without the network /run is empty, but for the cwd and writable paths under it; 'host' shows it", async () => {
    const dir = tempDir('cordon-test-', { parent: '/run', mode: 0o777 })
    const work = tempDir('w-', { parent: dir, mode: 0o777 })
    const hostEntries = ['dbus', 'systemd', 'user'].filter((e) => existsSync(path.join('/run', e)))
    const list = 'ls -A /run; echo ---; pwd; echo x > "$PWD/f" && echo wrote'
    const none = await run(['sh', '-c', list], { isolation, cwd: work, writable: [work] })
    assert.equal(none.status, 'ok', none.stderr)
    const [listed, rest] = none.stdout.split('---\n')
    for (const e of hostEntries)
      assert.ok(!listed!.split('\n').includes(e), `/run/${e} is visible: ${listed}`)
    assert.equal(rest, `${work}\nwrote\n`)
    assert.equal(readFileSync(path.join(work, 'f'), 'utf8'), 'x\n', 'written through to the host')
    const host = await run(['ls', '-A', '/run'], { isolation, network: 'host' })
    for (const e of hostEntries) assert.ok(host.stdout.split('\n').includes(e), `/run/${e} with network host`)
  })
})

describe('process tier as root: paths shown again under /run', { skip: noLauncher || notRoot }, () => {
  it("/dev/shm asked for as writable is the host's, as the policy says", async () => {
    const name = `cordon-test-${randomUUID()}`
    try {
      const r = await run(['sh', '-c', `echo x > /dev/shm/${name}`], { isolation, writable: ['/dev/shm'] })
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(readFileSync(path.join('/dev/shm', name), 'utf8'), 'x\n')
    } finally {
      spawnSync('rm', ['-f', path.join('/dev/shm', name)])
    }
  })

  it('from the fds they were judged on: one beneath a directory the sandbox uid cannot search is shown, alone', async () => {
    const closed = tempDir('cordon-test-', { parent: '/run', mode: 0o700 }) // root's: the sandbox cannot pass
    const open = path.join(closed, 'open')
    mkdirSync(open, { mode: 0o777 })
    spawnSync('chmod', ['0777', open])
    writeFileSync(path.join(closed, 'secret'), 'key\n', { mode: 0o644 })
    const r = await run(['sh', '-c', `echo x > ${open}/f; ls -A ${closed}`], { isolation, writable: [open] })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, 'open\n', 'the rest of /run is empty without the network')
    assert.equal(readFileSync(path.join(open, 'f'), 'utf8'), 'x\n')
  })
})

describe('process tier not as root', { skip: noLauncher || noUnprivileged() }, () => {
  it('SysV IPC and POSIX message queues are refused: there is no IPC namespace to keep them in', async () => {
    const out = await asUnprivileged<{ status: string; stdout: string; stderr: string }>(`
      const r = await run(['python3', '-c', ${JSON.stringify(IPC_PROBE)}], { isolation: 'process' })
      return { status: r.status, stdout: r.stdout, stderr: r.stderr }
    `)
    assert.equal(out.status, 'ok', out.stderr)
    assert.deepEqual(JSON.parse(out.stdout), { shmget: 1, semget: 1, msgget: 1, mq_open: 1 })
  })

  // Its TMPDIR was a directory on the host's disk, bounded per file only: with tmpfsBytes 64M a run wrote
  // 192 MiB there. Now it is a tmpfs of tmpfsBytes in a user namespace of its own, as is /dev/shm.
  it('TMPDIR and /dev/shm are tmpfs of tmpfsBytes in a namespace of its own: ENOSPC past it, nothing on the host', async () => {
    const fill = `
import errno, json, os, sys
def fill(d, name):
    try:
        with open(os.path.join(d, name), "wb") as f:
            for _ in range(24):
                f.write(bytes(1 << 20))
        return "wrote 24M"
    except OSError as e:
        return errno.errorcode[e.errno]
tmp = os.environ["TMPDIR"]
print(json.dumps({"tmp": tmp, "home": os.environ["HOME"], "uid": os.getuid(),
    "inTmp": [fill(tmp, "a"), fill(tmp, "b"), fill(tmp, "c")], "inShm": fill("/dev/shm", "cordon-fill")}), flush=True)
sys.stdin.readline()
`
    const out = await asUnprivileged<{
      seen: { tmp: string; home: string; uid: number; inTmp: string[]; inShm: string }
      hostFiles: string[]
      hostShm: boolean
      status: string
      stderr: string
      perProcessLimits: string[]
      left: boolean
    }>(`
      const { existsSync, readdirSync } = await import('node:fs')
      const handle = start(['python3', '-c', ${JSON.stringify(fill)}], {
        isolation: 'process',
        limits: { tmpfsBytes: '8M', maxFileSizeBytes: '1G' },
      })
      let text = ''
      for await (const chunk of handle.output) {
        text += chunk.data
        if (text.includes('\\n')) break
      }
      const seen = JSON.parse(text)
      // While the sandbox still holds what it wrote: none of it is in the host's view of either place.
      const hostFiles = readdirSync(seen.tmp)
      const hostShm = existsSync('/dev/shm/cordon-fill')
      handle.closeStdin()
      const r = await handle.result
      return { seen, hostFiles, hostShm, status: r.status, stderr: r.stderr, perProcessLimits: r.perProcessLimits,
        left: existsSync(seen.tmp) }
    `)
    assert.equal(out.status, 'ok', out.stderr)
    assert.equal(out.seen.uid, process.getuid?.() === 0 ? 65534 : process.getuid?.(), 'its own uid still')
    assert.equal(out.seen.home, out.seen.tmp)
    assert.deepEqual(out.seen.inTmp, ['ENOSPC', 'ENOSPC', 'ENOSPC'])
    assert.equal(out.seen.inShm, 'ENOSPC')
    assert.deepEqual(out.hostFiles, [], "written to the host's disk")
    assert.equal(out.hostShm, false, "written to the host's /dev/shm")
    assert.ok(!out.perProcessLimits.includes('tmpfsBytes'), JSON.stringify(out.perProcessLimits))
    assert.equal(out.left, false, 'its TMPDIR is gone after the run')
  })
})
