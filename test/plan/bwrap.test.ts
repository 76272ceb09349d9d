import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  BRIDGE_INSIDE,
  type BwrapSpec,
  bwrapArgs,
  CGROUP_ROOT,
  EXEC_INSIDE,
  NET_DIR_INSIDE,
  pinnedDirs,
  SYSTEM_PATHS,
} from '../../src/plan/bwrap.js'
import { IDENTITY_PATHS, type IdentityPath } from '../../src/plan/identity.js'

const BYTES = 64 * 1024 * 1024
const SIZE = String(BYTES)

/** A spec with nothing optional set: no writable paths, no hides, host root visible, cwd /work. */
const spec = (over: Partial<BwrapSpec> = {}): BwrapSpec => ({
  writable: [],
  cwd: '/work',
  network: 'none',
  tmpfsBytes: BYTES,
  hide: [],
  ...over,
})
const dir = (path: string) => ({ path, dir: true })
const file = (path: string) => ({ path, dir: false })

/** Number of '/'-separated levels of a path, as the builder sorts mounts by: '/' 0, '/usr' 1, '/etc/ssl' 2. */
const depth = (p: string) => (p === '/' ? 0 : p.split('/').length - 1)

// The argv pieces each kind of mount turns into.
const ro = (p: string) => ['--ro-bind', p, p]
const rw = (p: string) => ['--bind', p, p]
const tmpfs = (p: string) => ['--size', SIZE, '--tmpfs', p]
const devNull = (p: string) => ['--dev-bind', '/dev/null', p]
const remount = (p: string) => ['--remount-ro', p]
const tryBind = (paths: readonly string[]) => paths.flatMap((p) => ['--ro-bind-try', p, p])

const ROOT = ro('/')
/** Private mounts with network 'host'; without the network /run is private too. */
const PRIVATE_HOST = ['--dev', '/dev', ...tmpfs('/dev/shm'), '--proc', '/proc', ...tmpfs('/tmp')]
const PRIVATE = [...PRIVATE_HOST, ...tmpfs('/run')]
const HEAD = [...ROOT, ...PRIVATE]
/** Strict mode: the top-level system paths (/usr, /bin, ...) land before the private /dev, /proc, /tmp... */
const SYS1 = tryBind(SYSTEM_PATHS.filter((p) => depth(p) === 1))
/** ...and the /etc files after every other top-level mount. */
const SYS2 = tryBind(SYSTEM_PATHS.filter((p) => depth(p) === 2))
const TAIL = (cwd: string) => [
  '--remount-ro',
  '/dev',
  '--unshare-all',
  '--hostname',
  'cordon',
  '--die-with-parent',
  '--new-session',
  '--chdir',
  cwd,
]

/** Index at which `seq` (a flag and its values) starts in `args`, or -1. */
function indexOf(args: readonly string[], ...seq: string[]): number {
  for (let i = 0; i + seq.length <= args.length; i++) {
    if (seq.every((s, j) => args[i + j] === s)) return i
  }
  return -1
}

/** Index of `seq`, failing the test when it is absent. */
function at(args: readonly string[], ...seq: string[]): number {
  const i = indexOf(args, ...seq)
  assert.ok(i >= 0, `expected ${seq.join(' ')} in ${args.join(' ')}`)
  return i
}

/** Asserts that `first` occurs, `second` occurs, and `first` comes before `second`. */
function before(args: readonly string[], first: string[], second: string[]): void {
  const a = at(args, ...first)
  const b = at(args, ...second)
  assert.ok(a < b, `expected ${first.join(' ')} (at ${a}) before ${second.join(' ')} (at ${b})`)
}

const count = (args: readonly string[], flag: string) => args.filter((a) => a === flag).length

const under = (parent: string, p: string) =>
  p === parent || p.startsWith(parent.endsWith('/') ? parent : `${parent}/`)

/** How many values each bwrap option this builder emits takes. */
const ARITY: Record<string, number> = {
  '--ro-bind': 2,
  '--ro-bind-try': 2,
  '--bind': 2,
  '--bind-fd': 2,
  '--ro-bind-fd': 2,
  '--ro-bind-data': 2,
  '--symlink': 2,
  '--dev-bind': 2,
  '--dev': 1,
  '--proc': 1,
  '--tmpfs': 1,
  '--size': 1,
  '--remount-ro': 1,
  '--hostname': 1,
  '--chdir': 1,
  '--json-status-fd': 1,
  '--block-fd': 1,
  '--seccomp': 1,
  '--unshare-all': 0,
  '--share-net': 0,
  '--die-with-parent': 0,
  '--new-session': 0,
}

interface Op {
  flag: string
  values: string[]
  index: number
}

/** Splits argv into options, failing on an unknown option or a missing value. */
function parse(args: readonly string[]): Op[] {
  const ops: Op[] = []
  let i = 0
  while (i < args.length) {
    const flag = args[i]!
    const n = ARITY[flag]
    assert.ok(n !== undefined, `unexpected ${flag} at ${i} in ${args.join(' ')}`)
    assert.ok(i + n < args.length, `${flag} at ${i} is missing a value`)
    ops.push({ flag, values: args.slice(i + 1, i + 1 + n), index: i })
    i += 1 + n
  }
  return ops
}

const BINDS = new Set(['--ro-bind', '--ro-bind-try', '--bind', '--dev-bind'])
const MOUNTS = new Set([...BINDS, '--ro-bind-data', '--tmpfs', '--dev', '--proc'])
type Mount = Op & { dest: string }
/** Every mount, with where it lands, in argv order (a hidden file's /dev/null bind included). */
const mounts = (args: readonly string[]): Mount[] =>
  parse(args)
    .filter((op) => MOUNTS.has(op.flag))
    .map((op) => ({ ...op, dest: op.values.at(-1)! }))
/** Every bind mount, with where it lands, in argv order (a hidden file's /dev/null bind included). */
const binds = (args: readonly string[]) => mounts(args).filter((m) => BINDS.has(m.flag))
const show = (m: Mount) => `${m.flag} ${m.values.join(' ')} (at ${m.index})`

/** The mount that decides what `path` shows: the last one at or above it, or undefined. */
const topmost = (args: readonly string[], path: string) =>
  mounts(args)
    .filter((m) => under(m.dest, path))
    .at(-1)

/** Asserts that `path` shows the real host path: the last mount at or above it binds a real path in place. */
function visible(args: readonly string[], path: string): void {
  const top = topmost(args, path)
  assert.ok(
    top && BINDS.has(top.flag) && top.values[0] === top.dest,
    `${path} is covered by ${top ? show(top) : 'nothing'} in ${args.join(' ')}`,
  )
}

/** Asserts that the last mount at or above `path` is the hide of `path` itself. */
function hidden(args: readonly string[], path: string, isDir: boolean): void {
  const top = topmost(args, path)
  const ok = isDir
    ? top?.flag === '--tmpfs' && top.dest === path
    : top?.flag === '--dev-bind' && top.values[0] === '/dev/null' && top.dest === path
  assert.ok(ok, `${path} is covered by ${top ? show(top) : 'nothing'} in ${args.join(' ')}`)
}

describe('bwrapArgs', () => {
  describe('default mode (host root read-only)', () => {
    it('builds the exact default argv; a cwd outside /tmp is visible through / and not bound again', () => {
      assert.deepEqual(bwrapArgs(spec()), [...HEAD, ...TAIL('/work')])
    })

    it('builds the same argv for cwd /', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/' })), [...HEAD, ...TAIL('/')])
    })

    it('sizes the private /tmp, /run and /dev/shm with tmpfsBytes, --size right before --tmpfs', () => {
      const args = bwrapArgs(spec({ tmpfsBytes: 1234 }))
      for (const dir of ['/tmp', '/run', '/dev/shm'])
        assert.equal(at(args, '--size', '1234', '--tmpfs', dir) >= 0, true, dir)
      assert.equal(count(args, '--size'), 3)
    })

    it("turns bwrap's /dev (an unsized tmpfs the sandbox owns) read-only, after every mount", () => {
      const args = bwrapArgs(spec({ writable: ['/dev/shm/x'], hide: [dir('/home/u')] }))
      assert.ok(at(args, '--remount-ro', '/dev') > at(args, '--bind', '/dev/shm/x'), 'after the mounts in it')
      assert.ok(at(args, '--remount-ro', '/dev') < at(args, '--unshare-all'), 'before --unshare-all')
    })

    it('emits a well-formed argv (known options, each with its values)', () => {
      const args = bwrapArgs(spec())
      assert.deepEqual(
        parse(args).map((op) => op.flag),
        [
          '--ro-bind',
          '--dev',
          '--size',
          '--tmpfs',
          '--proc',
          '--size',
          '--tmpfs',
          '--size',
          '--tmpfs',
          '--remount-ro',
          '--unshare-all',
          '--hostname',
          '--die-with-parent',
          '--new-session',
          '--chdir',
        ],
      )
    })
  })

  describe('network', () => {
    it('adds --share-net right after --unshare-all for network host', () => {
      assert.deepEqual(bwrapArgs(spec({ network: 'host' })), [
        ...ROOT,
        ...PRIVATE_HOST,
        '--remount-ro',
        '/dev',
        '--unshare-all',
        '--share-net',
        ...TAIL('/work').slice(3),
      ])
    })

    it("keeps the host's /run (its daemon sockets) only with network host", () => {
      assert.equal(indexOf(bwrapArgs(spec({ network: 'host' })), '--tmpfs', '/run'), -1)
      at(bwrapArgs(spec()), '--tmpfs', '/run')
      // Asked to hide /run without the network: it is private already, not mounted twice.
      assert.equal(count(bwrapArgs(spec({ hide: [dir('/run')] })), '/run'), 1)
      at(bwrapArgs(spec({ network: 'host', hide: [dir('/run')] })), '--remount-ro', '/run')
    })

    it('never shares the network for network none', () => {
      for (const s of [
        spec(),
        spec({ writable: ['/data'], cwd: '/data' }),
        spec({ readable: ['/data'], hide: [dir('/home/u')] }),
      ]) {
        assert.equal(bwrapArgs(s).includes('--share-net'), false)
      }
    })
  })

  describe('cwd', () => {
    it('ro-binds a cwd under /tmp after the private /tmp', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/tmp/work' })), [
        ...HEAD,
        ...ro('/tmp/work'),
        ...TAIL('/tmp/work'),
      ])
    })

    // The sandbox's own /tmp, /run, /proc and /dev win over a cwd there: a host /tmp bound read-only would
    // leave the sandbox no scratch space and show every host user's files; a host /proc, the host's processes.
    for (const cwd of ['/tmp', '/run', '/proc', '/proc/sys', '/dev', '/dev/shm']) {
      it(`does not bind a cwd of ${cwd} over the sandbox's own`, () => {
        assert.deepEqual(bwrapArgs(spec({ cwd })), [...HEAD, ...TAIL(cwd)])
      })
    }

    it("does not bind a called function's module path under /proc either", () => {
      assert.deepEqual(bwrapArgs(spec({ visible: ['/proc/self'] })), [...HEAD, ...TAIL('/work')])
    })

    it('does not bind a cwd that only shares a name prefix with /tmp', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/tmpdata' })), [...HEAD, ...TAIL('/tmpdata')])
    })

    it('ro-binds a cwd under a hidden directory after the hide, before its --remount-ro', () => {
      const args = bwrapArgs(spec({ cwd: '/home/u/proj', hide: [dir('/home/u')] }))
      assert.deepEqual(args, [
        ...HEAD,
        ...tmpfs('/home/u'),
        ...ro('/home/u/proj'),
        ...remount('/home/u'),
        ...TAIL('/home/u/proj'),
      ])
    })

    it('does not bind a cwd that only contains a hidden directory', () => {
      const args = bwrapArgs(spec({ cwd: '/a', hide: [dir('/a/b/c')] }))
      assert.deepEqual(args, [...HEAD, ...tmpfs('/a/b/c'), ...remount('/a/b/c'), ...TAIL('/a')])
    })

    it('keeps a cwd that is itself a hidden directory visible: that hide is dropped', () => {
      const args = bwrapArgs(spec({ cwd: '/home/u', hide: [dir('/home/u')] }))
      assert.equal(indexOf(args, '--tmpfs', '/home/u'), -1)
      assert.equal(indexOf(args, '--remount-ro', '/home/u'), -1)
      visible(args, '/home/u')
      assert.deepEqual(args.slice(-2), ['--chdir', '/home/u'])
    })

    it('does not bind a cwd that only shares a name prefix with a hidden directory', () => {
      const args = bwrapArgs(spec({ cwd: '/home/u2', hide: [dir('/home/u')] }))
      assert.deepEqual(args, [...HEAD, ...tmpfs('/home/u'), ...remount('/home/u'), ...TAIL('/home/u2')])
    })

    it('does not bind a cwd next to a hidden file', () => {
      const args = bwrapArgs(spec({ cwd: '/srv', hide: [file('/srv.conf')] }))
      assert.deepEqual(args, [...HEAD, ...devNull('/srv.conf'), ...TAIL('/srv')])
    })

    it('never binds cwd /, whatever hides it or whether strict mode is on', () => {
      for (const s of [
        spec({ cwd: '/' }),
        spec({ cwd: '/', hide: [dir('/home/u'), file('/etc/shadow')] }),
        spec({ cwd: '/', readable: [] }),
        spec({ cwd: '/', readable: ['/data'], hide: [dir('/home/u')] }),
        spec({ cwd: '/', hide: [dir('/')] }),
      ]) {
        const args = bwrapArgs(s)
        const roots = binds(args).filter((b) => b.dest === '/')
        assert.deepEqual(
          roots.map((b) => b.flag),
          s.readable ? [] : ['--ro-bind'],
        )
        assert.equal(roots[0]?.index ?? 0, 0)
        assert.deepEqual(args.slice(-2), ['--chdir', '/'])
      }
    })

    it('drops a hide of / when / is the cwd', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/', hide: [dir('/')] })), [...HEAD, ...TAIL('/')])
    })

    it('does not ro-bind a cwd that is a writable path', () => {
      assert.deepEqual(bwrapArgs(spec({ writable: ['/tmp/job'], cwd: '/tmp/job' })), [
        ...HEAD,
        ...rw('/tmp/job'),
        ...TAIL('/tmp/job'),
      ])
    })

    it('does not ro-bind a cwd under a writable path, even under a hidden directory', () => {
      assert.deepEqual(
        bwrapArgs(spec({ writable: ['/home/u/proj'], cwd: '/home/u/proj/src', hide: [dir('/home/u')] })),
        [
          ...HEAD,
          ...tmpfs('/home/u'),
          ...rw('/home/u/proj'),
          ...remount('/home/u'),
          ...TAIL('/home/u/proj/src'),
        ],
      )
    })

    it('treats a writable / as covering a cwd outside /tmp, binding it before /dev, /proc and /tmp', () => {
      assert.deepEqual(bwrapArgs(spec({ writable: ['/'], cwd: '/work' })), [
        ...ROOT,
        ...rw('/'),
        ...PRIVATE,
        ...TAIL('/work'),
      ])
    })

    it('ro-binds a hidden cwd that only shares a name prefix with a writable path', () => {
      assert.deepEqual(bwrapArgs(spec({ writable: ['/tmp/job'], cwd: '/tmp/job2' })), [
        ...HEAD,
        ...ro('/tmp/job2'),
        ...rw('/tmp/job'),
        ...TAIL('/tmp/job2'),
      ])
    })

    it('binds a writable path inside a ro-bound cwd on top of it', () => {
      assert.deepEqual(bwrapArgs(spec({ writable: ['/tmp/work/out'], cwd: '/tmp/work' })), [
        ...HEAD,
        ...ro('/tmp/work'),
        ...rw('/tmp/work/out'),
        ...TAIL('/tmp/work'),
      ])
    })
  })

  describe('writable paths', () => {
    it('binds nested writable paths parent first whatever order they are given in', () => {
      const writable = ['/data/a/b', '/out', '/data', '/data/a']
      assert.deepEqual(bwrapArgs(spec({ writable, cwd: '/' })), [
        ...HEAD,
        ...rw('/out'),
        ...rw('/data'),
        ...rw('/data/a'),
        ...rw('/data/a/b'),
        ...TAIL('/'),
      ])
    })

    it('keeps writable paths of the same depth in the order given', () => {
      const args = bwrapArgs(spec({ writable: ['/z', '/a', '/m'], cwd: '/' }))
      assert.deepEqual(args, [...HEAD, ...rw('/z'), ...rw('/a'), ...rw('/m'), ...TAIL('/')])
    })

    it('does not modify the writable list it is given', () => {
      const writable = ['/data/a', '/data']
      bwrapArgs(spec({ writable, cwd: '/data' }))
      assert.deepEqual(writable, ['/data/a', '/data'])
    })

    it('binds a writable path under /tmp after the private /tmp', () => {
      const args = bwrapArgs(spec({ writable: ['/tmp/out'] }))
      before(args, ['--tmpfs', '/tmp'], rw('/tmp/out'))
    })

    it('binds a writable /tmp over the private /tmp', () => {
      assert.deepEqual(bwrapArgs(spec({ writable: ['/tmp'] })), [...HEAD, ...rw('/tmp'), ...TAIL('/work')])
    })

    it('binds a writable path inside a hidden directory after the hide and before its --remount-ro', () => {
      assert.deepEqual(bwrapArgs(spec({ writable: ['/home/u/out'], hide: [dir('/home/u')] })), [
        ...HEAD,
        ...tmpfs('/home/u'),
        ...rw('/home/u/out'),
        ...remount('/home/u'),
        ...TAIL('/work'),
      ])
    })
  })

  describe('hide', () => {
    it('turns a directory into a sized tmpfs remounted read-only at the end, a file into /dev/null', () => {
      const args = bwrapArgs(
        spec({ hide: [dir('/home/u'), file('/etc/secret.conf'), dir('/root')], writable: ['/out'] }),
      )
      // Top-level mounts first (the hide of /root after the writable /out), then the two-level hides in order.
      assert.deepEqual(args, [
        ...HEAD,
        ...rw('/out'),
        ...tmpfs('/root'),
        ...tmpfs('/home/u'),
        ...devNull('/etc/secret.conf'),
        ...remount('/home/u'),
        ...remount('/root'),
        ...TAIL('/work'),
      ])
    })

    it('binds a hidden file to /dev/null with --dev-bind (a plain bind is nodev: reading it fails)', () => {
      const args = bwrapArgs(spec({ hide: [file('/etc/secret.conf')] }))
      at(args, '--dev-bind', '/dev/null', '/etc/secret.conf')
      assert.equal(indexOf(args, '--ro-bind', '/dev/null'), -1)
      assert.equal(indexOf(args, '--bind', '/dev/null'), -1)
      assert.equal(count(args, '--dev-bind'), 1)
    })

    it('never remounts a hidden file', () => {
      const args = bwrapArgs(spec({ hide: [file('/etc/secret.conf')] }))
      assert.equal(count(args, '--remount-ro'), 1, 'only /dev')
      assert.equal(args.includes('/etc/secret.conf'), true)
      assert.equal(count(args, '--tmpfs'), 3) // /dev/shm, /tmp and /run
    })

    it("emits no --remount-ro but /dev's without hidden directories", () => {
      assert.equal(count(bwrapArgs(spec({ writable: ['/out'], cwd: '/tmp/x' })), '--remount-ro'), 1)
    })

    it('sizes every hidden directory tmpfs like /tmp', () => {
      const args = bwrapArgs(spec({ tmpfsBytes: 4096, hide: [dir('/a'), dir('/b'), file('/c')] }))
      assert.equal(count(args, '--tmpfs'), 5)
      assert.equal(count(args, '--size'), 5)
      for (const d of ['/dev/shm', '/tmp', '/run', '/a', '/b']) at(args, '--size', '4096', '--tmpfs', d)
    })

    it('remounts hidden directories in the order given, after every mount', () => {
      const args = bwrapArgs(
        spec({
          cwd: '/home/u/proj',
          writable: ['/home/u/proj/out'],
          hide: [dir('/home/u/a/b'), dir('/home/u')],
        }),
      )
      const lastMount = Math.max(...mounts(args).map((m) => m.index))
      const first = at(args, '--remount-ro', '/home/u/a/b')
      assert.equal(args[first + 2], '--remount-ro')
      assert.equal(args[first + 3], '/home/u')
      assert.ok(first > lastMount, `--remount-ro at ${first} before a mount at ${lastMount}`)
      assert.ok(first < at(args, '--unshare-all'), '--remount-ro after --unshare-all')
    })

    it('remounts a hidden directory after everything is bound inside it', () => {
      const args = bwrapArgs(
        spec({ cwd: '/home/u/proj', writable: ['/home/u/proj/out'], hide: [dir('/home/u')] }),
      )
      const remountAt = at(args, '--remount-ro', '/home/u')
      for (const b of binds(args)) assert.ok(b.index < remountAt, `${show(b)} after --remount-ro`)
      assert.ok(remountAt < at(args, '--unshare-all'), '--remount-ro after --unshare-all')
    })

    it('drops a hide of a writable, readable or cwd path, keeping the hides inside them', () => {
      const args = bwrapArgs(
        spec({
          cwd: '/c',
          writable: ['/w'],
          readable: ['/r'],
          hide: [dir('/w'), dir('/r'), dir('/c'), file('/w/.env'), dir('/r/secret'), file('/c/.env')],
        }),
      )
      assert.deepEqual(args, [
        ...SYS1,
        ...ro('/r'),
        ...PRIVATE,
        ...ro('/c'),
        ...rw('/w'),
        ...SYS2,
        ...devNull('/w/.env'),
        ...tmpfs('/r/secret'),
        ...devNull('/c/.env'),
        ...remount('/r/secret'),
        ...TAIL('/c'),
      ])
    })
  })

  describe('strict mode (readable set)', () => {
    it('lists system paths one or two levels deep only (the helpers of this file split them so)', () => {
      assert.equal(SYS1.length + SYS2.length, 3 * SYSTEM_PATHS.length)
    })

    it('builds the exact argv for an empty readable list: system paths only', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/', readable: [] })), [
        ...SYS1,
        ...PRIVATE,
        ...SYS2,
        ...TAIL('/'),
      ])
    })

    it('does not bind the host root, but every system path once with --ro-bind-try, top-level ones first', () => {
      const args = bwrapArgs(spec({ cwd: '/', readable: ['/data'] }))
      assert.equal(indexOf(args, '--ro-bind', '/', '/'), -1)
      assert.deepEqual(args.slice(0, SYS1.length), SYS1)
      for (const p of SYSTEM_PATHS) assert.equal(count(args, p), 2, p)
      assert.equal(count(args, '--ro-bind-try'), SYSTEM_PATHS.length)
    })

    it('lists the userland and a few /etc files, never / or all of /etc', () => {
      for (const p of [
        '/usr',
        '/bin',
        '/lib',
        '/lib64',
        '/etc/ld.so.cache',
        '/etc/passwd',
        '/etc/resolv.conf',
      ]) {
        assert.ok((SYSTEM_PATHS as readonly string[]).includes(p), p)
      }
      for (const p of ['/', '/etc', '/home', '/root', '/tmp', '/etc/shadow']) {
        assert.equal((SYSTEM_PATHS as readonly string[]).includes(p), false, p)
      }
    })

    it('binds readable paths read-only, parent first, on top of the hides above them, without mutating the list', () => {
      const readable = ['/home/u/proj/lib', '/data', '/home/u/proj']
      const args = bwrapArgs(spec({ cwd: '/', readable, hide: [dir('/home/u')] }))
      assert.deepEqual(args, [
        ...SYS1,
        ...ro('/data'),
        ...PRIVATE,
        ...SYS2,
        ...tmpfs('/home/u'),
        ...ro('/home/u/proj'),
        ...ro('/home/u/proj/lib'),
        ...remount('/home/u'),
        ...TAIL('/'),
      ])
      assert.deepEqual(readable, ['/home/u/proj/lib', '/data', '/home/u/proj'])
    })

    it('binds readable paths of the same depth after the system paths, in the order given', () => {
      const args = bwrapArgs(spec({ cwd: '/', readable: ['/z', '/etc/z', '/a'] }))
      assert.deepEqual(args, [
        ...SYS1,
        ...ro('/z'),
        ...ro('/a'),
        ...PRIVATE,
        ...SYS2,
        ...ro('/etc/z'),
        ...TAIL('/'),
      ])
    })

    it('binds a cwd outside the system and readable paths', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/work', readable: ['/data'] })), [
        ...SYS1,
        ...ro('/data'),
        ...PRIVATE,
        ...ro('/work'),
        ...SYS2,
        ...TAIL('/work'),
      ])
    })

    it('binds a cwd that only shares a name prefix with a system or readable path', () => {
      for (const cwd of ['/usrx', '/data2']) {
        at(bwrapArgs(spec({ cwd, readable: ['/data'] })), '--ro-bind', cwd, cwd)
      }
    })

    it('does not bind a cwd inside a system path or a readable path', () => {
      for (const cwd of ['/usr/src', '/etc/ssl/certs', '/data', '/data/proj']) {
        const args = bwrapArgs(spec({ cwd, readable: ['/data'] }))
        assert.deepEqual(
          binds(args).filter((b) => b.flag === '--ro-bind'),
          [{ flag: '--ro-bind', values: ['/data', '/data'], index: SYS1.length, dest: '/data' }],
          cwd,
        )
      }
    })

    it('shows a cwd inside a readable path that a hide covers through the readable path, without a second bind', () => {
      const args = bwrapArgs(
        spec({ cwd: '/home/u/proj/src', readable: ['/home/u/proj'], hide: [dir('/home/u')] }),
      )
      before(args, ['--tmpfs', '/home/u'], ro('/home/u/proj'))
      assert.equal(indexOf(args, ...ro('/home/u/proj/src')), -1, 'cwd not bound again')
      visible(args, '/home/u/proj/src')
    })

    it('binds a cwd under /tmp after the private /tmp', () => {
      const args = bwrapArgs(spec({ cwd: '/tmp/w', readable: [] }))
      assert.deepEqual(args, [...SYS1, ...PRIVATE, ...SYS2, ...ro('/tmp/w'), ...TAIL('/tmp/w')])
    })

    it('does not ro-bind a cwd covered by a writable path; a readable path inside it lands read-only on top', () => {
      assert.deepEqual(bwrapArgs(spec({ cwd: '/work/src', writable: ['/work'], readable: ['/work/ref'] })), [
        ...SYS1,
        ...PRIVATE,
        ...rw('/work'),
        ...SYS2,
        ...ro('/work/ref'),
        ...TAIL('/work/src'),
      ])
    })

    it('binds a path both readable and writable writable, after the read-only bind', () => {
      const args = bwrapArgs(spec({ cwd: '/', readable: ['/data'], writable: ['/data'] }))
      before(args, ro('/data'), rw('/data'))
      const top = topmost(args, '/data')
      assert.equal(top?.flag, '--bind')
    })

    it('treats undefined readable as default mode and [] as strict mode', () => {
      assert.equal(bwrapArgs(spec({ cwd: '/' }))[0], '--ro-bind')
      assert.equal(bwrapArgs(spec({ cwd: '/', readable: [] }))[0], '--ro-bind-try')
    })
  })

  describe('info and seccomp fds', () => {
    it('adds --json-status-fd after --chdir when statusFd is given', () => {
      assert.deepEqual(bwrapArgs(spec({ statusFd: 5 })), [...HEAD, ...TAIL('/work'), '--json-status-fd', '5'])
    })

    it('adds --seccomp after --chdir when seccompFd is given', () => {
      assert.deepEqual(bwrapArgs(spec({ seccompFd: 7 })), [...HEAD, ...TAIL('/work'), '--seccomp', '7'])
    })

    it('passes fd 0 through (only undefined means no seccomp)', () => {
      assert.deepEqual(bwrapArgs(spec({ seccompFd: 0 })).slice(-2), ['--seccomp', '0'])
    })

    it('puts --info-fd before --seccomp when both are given', () => {
      assert.deepEqual(bwrapArgs(spec({ statusFd: 3, seccompFd: 5 })).slice(-4), [
        '--json-status-fd',
        '3',
        '--seccomp',
        '5',
      ])
    })

    it('emits none of them when neither is given', () => {
      const args = bwrapArgs(spec({ readable: ['/data'], hide: [dir('/home/u')], network: 'host' }))
      for (const flag of ['--json-status-fd', '--seccomp']) assert.equal(args.includes(flag), false)
    })
  })

  describe('order invariants', () => {
    const cases: [string, BwrapSpec][] = [
      ['default', spec()],
      ['cwd under /tmp', spec({ cwd: '/tmp/a/b', writable: ['/tmp/a/b/out', '/tmp/c'] })],
      [
        'hidden home with cwd and writable inside',
        spec({
          cwd: '/home/u/proj',
          writable: ['/home/u/proj/out', '/tmp/o'],
          hide: [dir('/home/u'), file('/etc/secret'), dir('/root')],
          network: 'host',
          identityFd: (p) => (p === '/etc/passwd' ? 10 : 11),
        }),
      ],
      [
        'strict',
        spec({
          cwd: '/tmp/w',
          readable: ['/home/u/lib', '/tmp/ref'],
          writable: ['/tmp/w/out'],
          hide: [dir('/home/u')],
          statusFd: 3,
          seccompFd: 5,
          identityFd: (p) => (p === '/etc/passwd' ? 10 : 11),
        }),
      ],
      ['strict, cwd elsewhere', spec({ cwd: '/srv/x', readable: [], writable: ['/srv/x/y'] })],
      ['writable / with a hidden file', spec({ writable: ['/'], hide: [file('/etc/shadow'), dir('/root')] })],
      [
        'hides given child first, inside writable and cwd paths, and equal to them',
        spec({
          cwd: '/home/u/proj',
          writable: ['/data', '/home/u/proj/out'],
          hide: [
            file('/home/u/proj/out/.env'),
            dir('/home/u/.ssh'),
            dir('/data/cache'),
            dir('/home/u'),
            dir('/data'),
            dir('/home/u/proj'),
            file('/home/u/proj/.env'),
          ],
        }),
      ],
      [
        'strict, hides inside readable paths, given child first',
        spec({
          cwd: '/srv/p',
          readable: ['/srv/p', '/home/u/.config'],
          writable: ['/srv/p/out'],
          hide: [
            dir('/home/u/.config/gh'),
            dir('/home/u'),
            file('/srv/p/.env'),
            dir('/srv/p/out/cache'),
            dir('/srv/p'),
          ],
        }),
      ],
    ]

    for (const [name, s] of cases) {
      describe(name, () => {
        const args = bwrapArgs(s)
        const ops = parse(args)
        const all = mounts(args)
        const explicit = new Set([...(s.readable ?? []), ...s.writable, s.cwd])
        const kept = s.hide.filter((h) => !explicit.has(h.path))

        it('mounts the private /tmp once, before any bind under /tmp', () => {
          const tmp = ops.filter((op) => op.flag === '--tmpfs' && op.values[0] === '/tmp')
          assert.equal(tmp.length, 1)
          for (const b of binds(args)) {
            if (under('/tmp', b.dest)) assert.ok(b.index > tmp[0]!.index, `${show(b)} before /tmp`)
          }
        })

        it('gives every tmpfs a --size of tmpfsBytes right before it', () => {
          for (const [i, op] of ops.entries()) {
            if (op.flag === '--tmpfs')
              assert.deepEqual(ops[i - 1], { flag: '--size', values: [SIZE], index: op.index - 2 })
          }
        })

        it('puts every mount after all mounts of its ancestors', () => {
          for (const m of all) {
            for (const a of all) {
              if (a.dest !== m.dest && under(a.dest, m.dest)) {
                assert.ok(a.index < m.index, `${show(a)} lands after ${show(m)} inside it`)
              }
            }
          }
        })

        it('keeps every hide on top, dropping only those of a readable, writable or cwd path', () => {
          for (const h of kept) hidden(args, h.path, h.dir)
          for (const h of s.hide.filter((x) => explicit.has(x.path))) {
            assert.equal(indexOf(args, '--tmpfs', h.path), -1, h.path)
            assert.equal(indexOf(args, '--remount-ro', h.path), -1, h.path)
          }
        })

        it('keeps every writable path writable: its own --bind is the last mount at or above it', () => {
          for (const w of s.writable) {
            const top = topmost(args, w)
            assert.deepEqual(top && [top.flag, ...top.values], rw(w), w)
          }
        })

        it('keeps every readable path visible', () => {
          for (const r of s.readable ?? []) visible(args, r)
        })

        it('remounts kept hidden directories read-only after every mount, before --unshare-all', () => {
          const lastMount = Math.max(...all.map((m) => m.index))
          const unshare = at(args, '--unshare-all')
          for (const h of kept.filter((x) => x.dir)) {
            const r = at(args, '--remount-ro', h.path)
            assert.ok(r > lastMount && r < unshare, `--remount-ro ${h.path} at ${r}`)
          }
          assert.equal(count(args, '--remount-ro'), kept.filter((x) => x.dir).length + 1) // and /dev
        })

        it('keeps the cwd visible and changes into it', () => {
          visible(args, s.cwd)
          assert.equal(count(args, '--chdir'), 1)
          assert.equal(args[at(args, '--chdir') + 1], s.cwd)
          assert.ok(at(args, '--chdir') > at(args, '--unshare-all'), '--chdir before --unshare-all')
        })

        it('unshares every namespace exactly once, after all mounts', () => {
          assert.equal(count(args, '--unshare-all'), 1)
          const unshare = at(args, '--unshare-all')
          for (const op of ops) {
            if (MOUNTS.has(op.flag) || op.flag === '--remount-ro') {
              assert.ok(op.index < unshare, `${op.flag} at ${op.index} after --unshare-all`)
            }
          }
        })
      })
    }
  })

  describe('fixed problems (checked against bwrap 0.8)', () => {
    it('keeps a file hidden inside a writable path hidden', () => {
      const args = bwrapArgs(spec({ cwd: '/p', writable: ['/p'], hide: [file('/p/.env')] }))
      assert.deepEqual(args, [...HEAD, ...rw('/p'), ...devNull('/p/.env'), ...TAIL('/p')])
      hidden(args, '/p/.env', false)
    })

    it('keeps a file hidden inside a readable path hidden (strict mode)', () => {
      const args = bwrapArgs(spec({ cwd: '/', readable: ['/p'], hide: [file('/p/.env')] }))
      before(args, ro('/p'), devNull('/p/.env'))
      hidden(args, '/p/.env', false)
    })

    it('keeps a file hidden inside a cwd that is bound again (cwd under a hidden directory)', () => {
      const args = bwrapArgs(spec({ cwd: '/home/u/p', hide: [dir('/home/u'), file('/home/u/p/.env')] }))
      assert.deepEqual(args, [
        ...HEAD,
        ...tmpfs('/home/u'),
        ...ro('/home/u/p'),
        ...devNull('/home/u/p/.env'),
        ...remount('/home/u'),
        ...TAIL('/home/u/p'),
      ])
    })

    it('keeps a file hidden inside a cwd under /tmp hidden', () => {
      const args = bwrapArgs(spec({ cwd: '/tmp/p', hide: [file('/tmp/p/.env')] }))
      before(args, ro('/tmp/p'), devNull('/tmp/p/.env'))
      hidden(args, '/tmp/p/.env', false)
    })

    it('can hide a directory inside a writable, readable or re-bound cwd path', () => {
      for (const [s, parent] of [
        [spec({ cwd: '/', writable: ['/p'], hide: [dir('/p/secrets')] }), rw('/p')],
        [spec({ cwd: '/', readable: ['/p'], hide: [dir('/p/secrets')] }), ro('/p')],
        [spec({ cwd: '/tmp/p', hide: [dir('/tmp/p/secrets')] }), ro('/tmp/p')],
      ] as const) {
        const args = bwrapArgs(s)
        const secrets = `${parent[1]}/secrets`
        before(args, [...parent], ['--tmpfs', secrets])
        before(args, ['--tmpfs', secrets], remount(secrets))
        hidden(args, secrets, true)
      }
    })

    it('hides nested directories whatever order they are given in', () => {
      const args = bwrapArgs(spec({ hide: [dir('/home/u/.ssh'), dir('/home/u')] }))
      assert.deepEqual(args, [
        ...HEAD,
        ...tmpfs('/home/u'),
        ...tmpfs('/home/u/.ssh'),
        ...remount('/home/u/.ssh'),
        ...remount('/home/u'),
        ...TAIL('/work'),
      ])
    })

    it('only binds writable a directory that is both hidden and writable', () => {
      const args = bwrapArgs(spec({ cwd: '/', writable: ['/home/u'], hide: [dir('/home/u')] }))
      assert.deepEqual(args, [...HEAD, ...rw('/home/u'), ...TAIL('/')])
    })

    it('keeps /proc, /dev and /tmp private when / is writable or readable: / comes first', () => {
      for (const s of [spec({ writable: ['/'] }), spec({ readable: ['/'] })]) {
        const args = bwrapArgs(s)
        const root = Math.max(indexOf(args, ...rw('/')), indexOf(args, ...ro('/')))
        assert.ok(root >= 0, 'no bind of /')
        for (const p of ['/dev', '/proc', '/tmp']) {
          const top = topmost(args, p)
          assert.ok(top && top.dest === p && top.index > root, `${p} is covered by ${top && show(top)}`)
        }
      }
    })
  })

  describe('fixed problems (found by these tests against real bwrap 0.8)', () => {
    it('keeps a cwd visible that a writable path covers but /tmp or a hide inside it hides again', () => {
      for (const s of [
        spec({ writable: ['/'], cwd: '/tmp/x' }),
        spec({ writable: ['/home/u'], cwd: '/home/u/secret/x', hide: [dir('/home/u/secret')] }),
      ]) {
        visible(bwrapArgs(s), s.cwd)
      }
    })

    it('does not bind a system path again inside a readable, writable or re-bound cwd path', () => {
      for (const s of [
        spec({ cwd: '/', readable: ['/'] }),
        spec({ cwd: '/', readable: ['/etc'] }),
        spec({ cwd: '/', readable: [], writable: ['/etc'] }),
        spec({ cwd: '/etc', readable: [] }),
      ]) {
        const args = bwrapArgs(s)
        const shownBy = [...(s.readable ?? []), ...s.writable, ...(s.cwd === '/' ? [] : [s.cwd])]
        for (const b of binds(args).filter((x) => x.flag === '--ro-bind-try')) {
          const parent = shownBy.find((p) => p !== b.dest && under(p, b.dest))
          assert.ok(parent === undefined, `${show(b)} binds again inside ${parent}`)
        }
      }
    })

    it('keeps the private /tmp writable when /tmp is hidden', () => {
      const args = bwrapArgs(spec({ hide: [dir('/tmp')] }))
      assert.equal(indexOf(args, '--remount-ro', '/tmp'), -1)
    })
  })

  it("binds the run's socket directory, then the bridge over its mount point, after the private /tmp", () => {
    const args = bwrapArgs(spec({ netDir: '/tmp/cordon-net-x', bridge: '/opt/cordon/native/cordon-bridge' }))
    before(args, tmpfs('/tmp'), ['--ro-bind', '/tmp/cordon-net-x', NET_DIR_INSIDE])
    before(
      args,
      ['--ro-bind', '/tmp/cordon-net-x', NET_DIR_INSIDE],
      ['--ro-bind', '/opt/cordon/native/cordon-bridge', BRIDGE_INSIDE],
    )
    assert.equal(BRIDGE_INSIDE, `${NET_DIR_INSIDE}/bridge`)
    // On another root filesystem too: the tree's own userland never runs the bridge.
    const rootfs = { dir: '/srv/tree', entries: [{ name: 'usr', symlink: null }] }
    const onTree = bwrapArgs(spec({ rootfs, netDir: '/tmp/cordon-net-x', bridge: '/b' }))
    before(onTree, ['--ro-bind', '/srv/tree/usr', '/usr'], ['--ro-bind', '/b', BRIDGE_INSIDE])
  })

  describe('binds what was judged, by fd', () => {
    /** A spec binding by fd: every use gets the next fd from 10, recorded as [fd, path]. */
    const byFd = (over: Partial<BwrapSpec>) => {
      const uses: [number, string][] = []
      const args = bwrapArgs(
        spec({
          ...over,
          fdFor: (p) => {
            uses.push([10 + uses.length, p])
            return 10 + uses.length - 1
          },
        }),
      )
      return { args, uses }
    }
    /** fd binds in argv: [flag, fd, dest]. */
    const fdBinds = (args: readonly string[]) =>
      parse(args)
        .filter((op) => op.flag === '--bind-fd' || op.flag === '--ro-bind-fd')
        .map((op) => [op.flag, ...op.values])

    it('binds writable, readable, a re-bound cwd and visible paths by fd, each use with its own fd', () => {
      const { args, uses } = byFd({
        cwd: '/home/u/p',
        hide: [dir('/home/u')],
        readable: ['/data'],
        writable: ['/data', '/out'],
        visible: ['/home/u/lib'],
      })
      const pathOf = new Map(uses.map(([fd, p]) => [String(fd), p]))
      // Each fd is bound at the very path it was asked for.
      for (const [, fd, dest] of fdBinds(args)) assert.equal(pathOf.get(fd!), dest)
      assert.deepEqual(
        fdBinds(args)
          .map(([flag, , dest]) => `${flag} ${dest}`)
          .sort(),
        [
          '--bind-fd /data',
          '--bind-fd /out',
          '--ro-bind-fd /data',
          '--ro-bind-fd /home/u/lib',
          '--ro-bind-fd /home/u/p',
        ],
      )
      // /data is bound twice (read-only, then writable): two uses, two fds; bwrap closes each it binds.
      assert.equal(uses.filter(([, p]) => p === '/data').length, 2)
      assert.equal(new Set(uses.map(([fd]) => fd)).size, uses.length, 'no fd used twice')
      assert.equal(
        fdBinds(args).length,
        uses.length,
        'every fd handed out is bound: none reaches the sandbox',
      )
      // Nothing of the policy's is bound by path any more.
      for (const flag of ['--bind', '--ro-bind']) {
        for (const b of binds(args).filter((m) => m.flag === flag)) assert.equal(b.dest, '/', show(b))
      }
    })

    it("binds a root filesystem's directories by fd, as judged; its symlinks are made, not bound", () => {
      const rootfs = {
        dir: '/srv/tree',
        entries: [
          { name: 'usr', symlink: null },
          { name: 'bin', symlink: 'usr/bin' },
        ],
      }
      const { args, uses } = byFd({ rootfs, cwd: '/' })
      const [[fd, judged]] = uses as [[number, string]]
      assert.equal(judged, '/srv/tree/usr')
      assert.deepEqual(fdBinds(args), [['--ro-bind-fd', String(fd), '/usr']])
      assert.ok(!args.includes('/srv/tree/usr'), 'the tree is never bound by its name')
      const at = args.indexOf('--symlink')
      assert.deepEqual(args.slice(at + 1, at + 3), ['usr/bin', '/bin'])
    })

    it('asks no fd for a path it does not bind (the cwd shown through the root)', () => {
      const { args, uses } = byFd({ cwd: '/srv/p' })
      assert.deepEqual(uses, [])
      assert.deepEqual(args, [...HEAD, ...TAIL('/srv/p')])
    })

    it('binds its own paths by path: system paths, hides, private mounts, the proxy directory', () => {
      const { args, uses } = byFd({ cwd: '/', readable: [], hide: [file('/etc/x')], netDir: '/run/cordon/n' })
      assert.deepEqual(uses, [])
      at(args, '--ro-bind', '/run/cordon/n', NET_DIR_INSIDE)
      at(args, '--dev-bind', '/dev/null', '/etc/x')
    })

    it('binds the exec step read-only in its own /dev, by fd, before /dev turns read-only', () => {
      const { args, uses } = byFd({ execStep: '/opt/cordon/native/cordon-launch' })
      assert.deepEqual(uses, [[10, '/opt/cordon/native/cordon-launch']])
      before(args, ['--dev', '/dev'], ['--ro-bind-fd', '10', EXEC_INSIDE])
      before(args, ['--ro-bind-fd', '10', EXEC_INSIDE], remount('/dev'))
      // Without fds (a unit spec), by path.
      at(bwrapArgs(spec({ execStep: '/x/launch' })), '--ro-bind', '/x/launch', EXEC_INSIDE)
    })
  })

  describe("the host's unix sockets (network none)", () => {
    const sockets = [
      '/var/lib/d/api.sock', // through the read-only root
      '/tmp/x.sock', // the sandbox's own /tmp
      '/run/dbus/system_bus_socket', // its own /run
      '/home/u/.gnupg/S.agent', // hidden
      '/data/s.sock', // inside a writable path
      '/dev/log', // its own /dev
    ]
    const covered = (args: readonly string[]) =>
      binds(args)
        .filter((b) => b.flag === '--ro-bind' && b.values[0] === '/dev/null')
        .map((b) => b.dest)

    it('covers with /dev/null each one the sandbox would see, and none it cannot', () => {
      const args = bwrapArgs(spec({ sockets, hide: [dir('/home/u')] }))
      assert.deepEqual(covered(args).sort(), ['/data/s.sock', '/var/lib/d/api.sock'])
      for (const s of covered(args)) {
        const top = topmost(args, s)
        assert.ok(top?.dest === s && top.values[0] === '/dev/null', `${s} is covered last`)
      }
    })

    it('covers one inside a cwd re-bound over the private /tmp', () => {
      const args = bwrapArgs(spec({ cwd: '/tmp/w', sockets: ['/tmp/w/s.sock', '/tmp/other.sock'] }))
      assert.deepEqual(covered(args), ['/tmp/w/s.sock'])
      before(args, ro('/tmp/w'), ['--ro-bind', '/dev/null', '/tmp/w/s.sock'])
    })

    it('asks whether a socket is still there only of those it would cover, and leaves one that is gone', () => {
      const asked: string[] = []
      const args = bwrapArgs(
        spec({
          sockets,
          hide: [dir('/home/u')],
          socketLive: (p) => {
            asked.push(p)
            return p !== '/data/s.sock'
          },
        }),
      )
      assert.deepEqual(asked.sort(), ['/data/s.sock', '/var/lib/d/api.sock'])
      assert.deepEqual(covered(args), ['/var/lib/d/api.sock'])
    })

    it("leaves them all with the host's network", () => {
      assert.deepEqual(covered(bwrapArgs(spec({ sockets, network: 'host' }))), [])
    })

    it('leaves those inside a path the policy names (writable, readable): shown whole, sockets and all', () => {
      for (const named of [
        { writable: ['/data'] },
        { writable: ['/data/s.sock'] },
        { readable: ['/data'] },
      ]) {
        assert.deepEqual(covered(bwrapArgs(spec({ cwd: '/', sockets: ['/data/s.sock'], ...named }))), [])
      }
      // Strict mode shows nothing else: nothing else to cover.
      const strict = bwrapArgs(
        spec({ cwd: '/', readable: ['/srv'], sockets: ['/var/lib/d/api.sock', '/srv/s'] }),
      )
      assert.deepEqual(covered(strict), [])
    })

    it('covers one inside the cwd shown through the root (started from a directory, not naming it)', () => {
      assert.deepEqual(covered(bwrapArgs(spec({ cwd: '/srv/p', sockets: ['/srv/p/dev.sock'] }))), [
        '/srv/p/dev.sock',
      ])
    })
  })

  describe("cordon's own /etc/passwd and /etc/group", () => {
    /** The fds asked for, in order, and the spec's callback that records them. */
    const asked = () => {
      const fds: IdentityPath[] = []
      const identityFd = (p: IdentityPath) => {
        fds.push(p)
        return p === '/etc/passwd' ? 10 : 11
      }
      return { fds, identityFd }
    }
    const data = (fd: string, p: string) => ['--ro-bind-data', fd, p]
    const OWN = [...data('10', '/etc/passwd'), ...data('11', '/etc/group')]

    it('shows them read-only over the host root, from the fds it asks for', () => {
      const a = asked()
      const args = bwrapArgs(spec({ identityFd: a.identityFd }))
      assert.deepEqual(a.fds, [...IDENTITY_PATHS])
      before(args, ro('/'), data('10', '/etc/passwd'))
      before(args, data('10', '/etc/passwd'), data('11', '/etc/group'))
      before(args, data('11', '/etc/group'), remount('/dev'))
      for (const p of IDENTITY_PATHS) assert.equal(topmost(args, p)?.flag, '--ro-bind-data')
    })

    it("strict mode binds neither host file, then cordon's", () => {
      const args = bwrapArgs(spec({ readable: [], identityFd: asked().identityFd }))
      for (const p of IDENTITY_PATHS) assert.equal(indexOf(args, '--ro-bind-try', p, p), -1)
      at(args, ...OWN)
      // Without them the host's, as before.
      for (const p of IDENTITY_PATHS) at(bwrapArgs(spec({ readable: [] })), '--ro-bind-try', p, p)
    })

    it('covers the host files inside a listed, writable or re-bound /etc too', () => {
      for (const s of [
        spec({ readable: ['/etc'] }),
        spec({ writable: ['/etc'] }),
        spec({ readable: [], cwd: '/etc' }),
        spec({ cwd: '/etc', hide: [dir('/etc')] }),
      ]) {
        const args = bwrapArgs({ ...s, identityFd: asked().identityFd })
        for (const p of IDENTITY_PATHS) assert.equal(topmost(args, p)?.flag, '--ro-bind-data', args.join(' '))
      }
    })

    it('leaves a file the policy lists itself, one it hides, and another root, and asks no fd for them', () => {
      const cases: [BwrapSpec, IdentityPath[]][] = [
        [spec({ readable: ['/etc/passwd'] }), ['/etc/group']],
        [spec({ writable: ['/etc/group'] }), ['/etc/passwd']],
        [spec({ hide: [file('/etc/passwd')] }), ['/etc/group']],
        [spec({ hide: [dir('/etc')] }), []],
        [spec({ rootfs: { dir: '/r', entries: [{ name: 'etc', symlink: null }] } }), []],
      ]
      for (const [s, shown] of cases) {
        const a = asked()
        const args = bwrapArgs({ ...s, identityFd: a.identityFd })
        assert.deepEqual(a.fds, shown)
        assert.equal(args.filter((x) => x === '--ro-bind-data').length, shown.length)
      }
      const hiddenArgs = bwrapArgs(spec({ hide: [file('/etc/passwd')], identityFd: asked().identityFd }))
      hidden(hiddenArgs, '/etc/passwd', false)
    })
  })

  describe("the sandbox's own cgroup at /sys/fs/cgroup", () => {
    const v1 = {
      binds: [
        { source: '/sys/fs/cgroup/memory/p/cordon-1-a', dest: '/sys/fs/cgroup/memory' },
        { source: '/sys/fs/cgroup/pids/cordon-1-a', dest: '/sys/fs/cgroup/pids' },
        { source: '/sys/fs/cgroup/cpu,cpuacct/cordon-1-a', dest: '/sys/fs/cgroup/cpu,cpuacct' },
      ],
      links: [
        { at: '/sys/fs/cgroup/cpu', target: 'cpu,cpuacct' },
        { at: '/sys/fs/cgroup/cpuacct', target: 'cpu,cpuacct' },
      ],
    }

    it('v1: a read-only tmpfs with each hierarchy of its own bound at its mount point, and the links', () => {
      const args = bwrapArgs(spec({ cgroups: v1 }))
      before(args, ro('/'), tmpfs(CGROUP_ROOT))
      for (const b of v1.binds) {
        before(args, tmpfs(CGROUP_ROOT), ['--ro-bind', b.source, b.dest])
        before(args, ['--ro-bind', b.source, b.dest], remount(CGROUP_ROOT))
      }
      for (const l of v1.links) at(args, '--symlink', l.target, l.at)
      before(args, remount(CGROUP_ROOT), ['--unshare-all'])
    })

    it('v2 at the root: its own directory bound over it, no tmpfs', () => {
      const args = bwrapArgs(
        spec({
          cgroups: { binds: [{ source: '/sys/fs/cgroup/a/cordon-1-a', dest: CGROUP_ROOT }], links: [] },
        }),
      )
      at(args, '--ro-bind', '/sys/fs/cgroup/a/cordon-1-a', CGROUP_ROOT)
      assert.equal(indexOf(args, '--tmpfs', CGROUP_ROOT), -1)
      assert.equal(indexOf(args, '--remount-ro', CGROUP_ROOT), -1)
    })

    it('no cgroup: an empty read-only tmpfs', () => {
      const args = bwrapArgs(spec({ cgroups: { binds: [], links: [] } }))
      at(args, ...tmpfs(CGROUP_ROOT))
      at(args, ...remount(CGROUP_ROOT))
      assert.equal(binds(args).filter((b) => b.dest.startsWith(CGROUP_ROOT)).length, 0)
    })

    it("nothing where the host's is not shown anyway: strict mode, another root, a hidden /sys", () => {
      for (const s of [
        spec({ cgroups: v1, readable: [] }),
        spec({ cgroups: v1, rootfs: { dir: '/r', entries: [{ name: 'sys', symlink: null }] } }),
        spec({ cgroups: v1, hide: [dir('/sys')] }),
      ]) {
        assert.equal(
          bwrapArgs(s).some((a) => a.startsWith(CGROUP_ROOT)),
          false,
        )
      }
    })
  })
})

describe('bwrapArgs: directories the sandbox uid cannot search', () => {
  const closed =
    (...dirs: string[]) =>
    (dir: string) =>
      !dirs.includes(dir)

  it('covers one above a named path where the host shows it; the paths are bound into it, nothing else', () => {
    const args = bwrapArgs(
      spec({ cwd: '/srv/x/p', writable: ['/srv/x/p/w'], searchable: closed('/srv/x', '/srv/x/p/w') }),
    )
    before(args, tmpfs('/srv/x'), ro('/srv/x/p'))
    before(args, ro('/srv/x/p'), rw('/srv/x/p/w'))
    before(args, rw('/srv/x/p/w'), remount('/srv/x'))
    assert.equal(indexOf(args, ...tmpfs('/srv/x/p/w')), -1, 'a named path itself is never covered')
  })

  it('covers one inside a shown path too, and none beneath a hide or a private mount', () => {
    const args = bwrapArgs(
      spec({
        cwd: '/root/c',
        hide: [dir('/root')],
        writable: ['/srv/p/deep/w', '/tmp/x/w'],
        visible: ['/srv/p'],
        searchable: closed('/root', '/srv/p/deep', '/tmp/x'),
      }),
    )
    // /srv/p shows through the root: the cover goes on the host's view of it.
    before(args, tmpfs('/srv/p/deep'), rw('/srv/p/deep/w'))
    assert.equal(args.join(' ').split('--tmpfs /root ').length, 2, 'only the hide covers /root')
    assert.equal(indexOf(args, ...tmpfs('/tmp/x')), -1)
  })

  it('covers nothing in strict mode (the root is bwrap’s own) or when every directory is searchable', () => {
    const strict = bwrapArgs(spec({ cwd: '/', readable: ['/srv/x/r'], searchable: closed('/srv/x') }))
    assert.equal(indexOf(strict, ...tmpfs('/srv/x')), -1)
    const open = bwrapArgs(spec({ cwd: '/srv/x/p' }))
    assert.equal(indexOf(open, ...tmpfs('/srv/x')), -1)
  })

  it("covers the launcher's staging directory where the host's /run shows, not beneath the private /run", () => {
    const host = bwrapArgs(spec({ network: 'host', stageDir: '/run/cordon' }))
    before(host, tmpfs('/run/cordon'), remount('/run/cordon'))
    const none = bwrapArgs(spec({ stageDir: '/run/cordon' }))
    assert.equal(indexOf(none, ...tmpfs('/run/cordon')), -1)
  })
})

describe('pinnedDirs', () => {
  it('the directories between a writable path and a hidden one, and no others', () => {
    const hide = [
      { path: '/w/data/secret' },
      { path: '/w/a/b/c/key' },
      { path: '/w/.env' },
      { path: '/etc/x/y' },
    ]
    assert.deepEqual(pinnedDirs(hide, ['/w'], ['/w']), ['/w/a', '/w/a/b', '/w/a/b/c', '/w/data'])
    // A listed path is a mount point already; beneath it, its own pins.
    assert.deepEqual(pinnedDirs(hide, ['/w', '/w/a/b'], ['/w', '/w/a/b']), ['/w/a', '/w/a/b/c', '/w/data'])
    // Nothing inside a hidden directory: a bind there would show it.
    assert.deepEqual(pinnedDirs([{ path: '/w/a' }, { path: '/w/a/b/key' }], ['/w'], ['/w']), [])
    assert.deepEqual(pinnedDirs(hide, [], []), [])
  })
})
