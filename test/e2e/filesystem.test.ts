// Filesystem policy from inside a real sandbox: hidden paths, tmpfs size, strict mode, symlinks.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { probeCapabilities } from '../../src/host/capabilities.js'
import { SOCKETS_TTL_MS } from '../../src/host/sockets.js'
import { openSpawner, PolicyError, type RunOptions, run } from '../../src/index.js'
import {
  asUnprivileged,
  NOBODY,
  noLauncher,
  noNamespace,
  noSpawner,
  notRoot,
  noUnprivileged,
  skipTier,
  TIERS,
  tempDir,
} from '../helpers.js'

// Outside /tmp (which the sandbox replaces), so the sandbox would see these unless hidden.
const base = mkdtempSync('/var/tmp/cordon-fs-')
chmodSync(base, 0o755)
after(() => rmSync(base, { recursive: true, force: true }))

describe('filesystem (namespace tier)', { skip: noNamespace }, () => {
  const isolation = 'namespace'

  it("hides cordon's home by default", async () => {
    const secret = path.join(os.homedir(), `.cordon-secret-${process.pid}`)
    writeFileSync(secret, 'token', { mode: 0o644 })
    try {
      const r = await run(
        ['sh', '-c', `cat ${secret} 2>/dev/null || echo hidden; ls -A ${os.homedir()} | wc -l`],
        {
          isolation,
          cwd: '/',
        },
      )
      assert.equal(r.stdout, 'hidden\n0\n')
    } finally {
      rmSync(secret)
    }
  })

  it('hide: a directory shows empty, a file reads as /dev/null, a writable path inside still shows', async () => {
    const dir = path.join(base, 'creds')
    const inner = path.join(dir, 'work')
    mkdirSync(inner, { recursive: true })
    chmodSync(inner, 0o777)
    writeFileSync(path.join(dir, 'key'), 'secret')
    const file = path.join(base, 'config.json')
    writeFileSync(file, '{"token": 1}')
    const r = await run(
      [
        'sh',
        '-c',
        `ls ${dir}; cat ${file}; echo -; echo ok > ${inner}/out && cat ${inner}/out; touch ${dir}/x || echo ro`,
      ],
      { isolation, cwd: '/', hide: [dir, file], writable: [inner] },
    )
    assert.equal(r.stdout, 'work\n-\nok\nro\n')
    assert.equal(existsSync(path.join(dir, 'x')), false)
  })

  it('hiding a path that does not exist is fine', async () => {
    const r = await run(['true'], { isolation, hide: ['/does/not/exist'] })
    assert.equal(r.status, 'ok')
  })

  it('/tmp has a size limit; filling it is an ordinary write error', async () => {
    const r = await run(
      ['sh', '-c', 'head -c 20000000 /dev/zero > /tmp/fill || echo full; du -k /tmp/fill'],
      {
        isolation,
        limits: { tmpfsBytes: '8M' },
      },
    )
    assert.equal(r.status, 'ok')
    assert.match(r.stderr, /No space left on device/)
    assert.match(r.stdout, /^full\n8192\t/)
  })

  it('strict mode: only system directories and readable paths are visible', async () => {
    const visible = path.join(base, 'visible')
    mkdirSync(visible)
    writeFileSync(path.join(visible, 'data'), 'here')
    writeFileSync(path.join(base, 'invisible'), 'not here')
    const r = await run(
      [
        'sh',
        '-c',
        `cat ${visible}/data; echo; ls ${base}; ls /work 2>/dev/null || echo no-work; test -e /etc/hostname || echo no-hostname; python3 -c 'print(3)'`,
      ],
      { isolation, cwd: '/', readable: [visible] },
    )
    assert.equal(r.stdout, `here\nvisible\nno-work\nno-hostname\n3\n`)
  })

  it('strict mode with all of /etc readable, or cwd /etc, starts (no system path bound again inside)', async () => {
    const a = await run(['cat', '/etc/hostname'], { isolation, cwd: '/', readable: ['/etc'] })
    assert.equal(a.status, 'ok', a.stderr)
    const b = await run(['ls', 'passwd'], { isolation, cwd: '/etc', readable: [] })
    assert.equal(b.status, 'ok', b.stderr)
  })

  it('a hidden file inside a writable path reads empty and is never changed', async () => {
    const dir = path.join(base, 'hidden-file')
    mkdirSync(dir)
    chmodSync(dir, 0o777)
    writeFileSync(path.join(dir, '.env'), 'SECRET=1')
    const r = await run(['sh', '-c', 'cat .env; echo x > .env; echo done'], {
      isolation,
      cwd: dir,
      writable: [dir],
      hide: [path.join(dir, '.env')],
    })
    assert.equal(r.stdout, 'done\n')
    assert.equal(readFileSync(path.join(dir, '.env'), 'utf8'), 'SECRET=1')
  })

  it('a hidden path deep in a writable one stays hidden: no run can move it out from under its name', async () => {
    // A hide is by name. A run renamed the directory above it (data -> data2: only the hidden path itself
    // was a mount point) and left a link or nothing at the old name: the next run with the same policy
    // hid nothing and read data2/secret/key. Each directory between the writable path and the hidden one
    // is a mount point of its own now, which no one in the sandbox can rename or remove (EBUSY).
    const dir = path.join(base, 'deep-hide')
    mkdirSync(path.join(dir, 'data', 'secret'), { recursive: true })
    mkdirSync(path.join(dir, 'a', 'b'), { recursive: true })
    chmodSync(dir, 0o777)
    chmodSync(path.join(dir, 'data'), 0o777)
    chmodSync(path.join(dir, 'a'), 0o777)
    chmodSync(path.join(dir, 'a', 'b'), 0o777)
    writeFileSync(path.join(dir, 'data', 'secret', 'key'), 'TOPSECRET\n')
    writeFileSync(path.join(dir, 'a', 'b', 'key'), 'ALSOSECRET\n')
    const policy: RunOptions = {
      isolation,
      cwd: dir,
      writable: [dir],
      hide: [path.join(dir, 'data', 'secret'), path.join(dir, 'a', 'b', 'key')],
    }
    const first = await run(
      [
        'sh',
        '-c',
        'mv data data2 || echo kept data; mv a a2 || echo kept a; rm -rf a/b data; ln -s /nonexistent data; ' +
          'mkdir -p data/secret; cat data/secret/key a/b/key; echo x > a/b/key; ls data data/secret a a/b; echo ran',
      ],
      policy,
    )
    assert.match(first.stdout, /kept data\nkept a\n/)
    assert.match(first.stdout, /ran\n$/)
    const second = await run(
      ['sh', '-c', 'cat data2/secret/key a2/b/key data/secret/key a/b/key; echo ran'],
      policy,
    )
    assert.doesNotMatch(first.stdout + second.stdout, /SECRET/)
    assert.equal(readFileSync(path.join(dir, 'data', 'secret', 'key'), 'utf8'), 'TOPSECRET\n')
    assert.equal(readFileSync(path.join(dir, 'a', 'b', 'key'), 'utf8'), 'ALSOSECRET\n')
    // Beside the hidden path, the directories pinned above it stay as writable as before.
    const third = await run(['sh', '-c', 'echo new > data/other && cat data/other'], policy)
    assert.equal(third.stdout, 'new\n', third.stderr)
  })

  it('strict mode needs the namespace tier: the process tier refuses it', async () => {
    const r = await run(['true'], { isolation: 'process', readable: [base] })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'readable')
  })

  it('a hide list given to the process tier (no mount namespace) is refused, not dropped', async () => {
    const r = await run(['true'], { isolation: 'process', hide: [base] })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'hide')
    assert.match(r.violation?.message ?? '', /namespace tier/)
    // The default list and an empty one ask for nothing the tier cannot give.
    assert.equal((await run(['true'], { isolation: 'process' })).status, 'ok')
    assert.equal((await run(['true'], { isolation: 'process', hide: [] })).status, 'ok')
  })

  it('a symlinked writable path is bound at its real place; a symlink inside cannot write elsewhere', async () => {
    const real = path.join(base, 'real')
    mkdirSync(real)
    chmodSync(real, 0o777)
    const link = path.join(base, 'link')
    symlinkSync(real, link)
    symlinkSync('/etc', path.join(real, 'escape'))
    const r = await run(
      ['sh', '-c', `echo a > ${link}/via-link && echo b > ${real}/escape/cordon-x || echo refused`],
      {
        isolation,
        cwd: '/',
        writable: [link],
      },
    )
    assert.equal(r.stdout, 'refused\n')
    assert.equal(existsSync(path.join(real, 'via-link')), true)
    assert.equal(existsSync('/etc/cordon-x'), false)
  })

  // Not as root a sandbox has cordon's own uid, so a symlink it leaves in its writable directory looks like
  // one of the user's: a later run naming a path through it must not be carried into what it hides.
  it("a symlink a sandbox of cordon's uid planted carries no later cwd or writable into a hidden path", {
    skip: notRoot || noUnprivileged(),
  }, async () => {
    const dir = tempDir('cordon-planted-', { parent: '/var/tmp', mode: 0o755 })
    mkdirSync(path.join(dir, 'secret'))
    writeFileSync(path.join(dir, 'secret', 'key'), 's3cret')
    mkdirSync(path.join(dir, 'proj'))
    for (const p of ['', 'secret', 'secret/key', 'proj']) chownSync(path.join(dir, p), NOBODY.uid, NOBODY.gid)
    const out = await asUnprivileged<{
      planted: string
      later: { status: string; stdout: string; error: string }[]
    }>(`
      const dir = ${JSON.stringify(dir)}
      const hide = [dir + '/secret']
      const first = await run(['ln', '-s', dir + '/secret', dir + '/proj/out'], {
        isolation: 'namespace', cwd: dir + '/proj', writable: [dir + '/proj'], hide,
      })
      const later = []
      for (const options of [{ cwd: dir + '/proj/out' }, { cwd: '/', writable: [dir + '/proj/out'] }, { cwd: '/', readable: [dir + '/proj/out', '/usr', '/bin'] }]) {
        try {
          const r = await run(['sh', '-c', 'cat ' + dir + '/proj/out/key; echo x > ' + dir + '/proj/out/owned'], { isolation: 'namespace', hide, ...options })
          later.push({ status: r.status, stdout: r.stdout, error: '' })
        } catch (e) {
          later.push({ status: 'thrown', stdout: '', error: e.field + ': ' + e.message })
        }
      }
      return { planted: first.status, later }
    `)
    assert.equal(out.planted, 'ok')
    for (const r of out.later) {
      assert.equal(r.status, 'thrown', JSON.stringify(r))
      assert.match(r.error, /^(cwd|writable\.0|readable\.0): .*symlink .*hidden/)
    }
    assert.equal(existsSync(path.join(dir, 'secret', 'owned')), false)
    rmSync(dir, { recursive: true, force: true })
  })
})

const noVenv =
  spawnSync('python3', ['-m', 'venv', '--help'], { stdio: 'ignore' }).status === 0
    ? false
    : "python3's venv module is not installed"

// Not as root (a developer's own account): the private TMPDIR is bounded in both tiers. The process tier's
// was a directory on the host's disk, bounded per file only (tmpfsBytes 64M let a run write 192 MiB).
describe('TMPDIR is bounded by tmpfsBytes not as root too (both tiers, as uid 65534)', {
  skip: noUnprivileged(),
}, () => {
  for (const isolation of TIERS) {
    it(`${isolation} tier: three files of the whole size, and TMPDIR holds one`, {
      skip: skipTier(isolation),
    }, async () => {
      const out = await asUnprivileged<{ status: string; stdout: string; stderr: string }>(`
        const r = await run(['sh', '-c', 'for i in 1 2 3; do head -c 8388608 /dev/zero > "$TMPDIR/f$i" 2>/dev/null || echo full $i; done; du -sk "$TMPDIR" | cut -f1'], {
          isolation: ${JSON.stringify(isolation)},
          limits: { tmpfsBytes: '8M', maxFileSizeBytes: '1G' },
        })
        return { status: r.status, stdout: r.stdout, stderr: r.stderr }
      `)
      assert.equal(out.status, 'ok', out.stderr)
      const lines = out.stdout.trim().split('\n')
      assert.deepEqual(
        lines.slice(0, -1),
        ['full 1', 'full 2', 'full 3'].slice(-lines.length + 1),
        out.stdout,
      )
      assert.ok(Number(lines.at(-1)) <= 8192, `TMPDIR holds ${lines.at(-1)} KiB`)
    })
  }
})

describe('what runs is what was judged (both tiers)', () => {
  for (const isolation of TIERS) {
    describe(isolation, { skip: skipTier(isolation) }, () => {
      it('a program found through a symlink runs as its real path, with argv[0] the path as found', async () => {
        const dir = tempDir('cordon-argv0-', { mode: 0o755, parent: '/var/tmp' })
        const link = path.join(dir, 'my-sh')
        symlinkSync('/bin/sh', link)
        const real = path.resolve('/bin', readlinkOr('/bin/sh'))
        const r = await run([link, '-c', 'echo "$0"; readlink /proc/$$/exe'], { isolation, cwd: '/' })
        assert.equal(r.status, 'ok', r.stderr)
        assert.equal(r.stdout, `${link}\n${real}\n`)
      })

      it('python3 -m venv works, and its symlinked bin/python finds its pyvenv.cfg', {
        skip: noVenv,
      }, async () => {
        const dir = tempDir('cordon-venv-', { mode: 0o777, parent: '/var/tmp' })
        const venv = path.join(dir, 'env')
        const made = await run(['python3', '-m', 'venv', '--without-pip', venv], {
          isolation,
          cwd: dir,
          writable: [dir],
          limits: { wallTimeMs: '60s' },
        })
        assert.equal(made.status, 'ok', made.stderr)
        const r = await run([path.join(venv, 'bin', 'python'), '-c', 'import sys; print(sys.prefix)'], {
          isolation,
          cwd: '/',
        })
        assert.equal(r.status, 'ok', r.stderr)
        assert.equal(r.stdout, `${venv}\n`)
      })

      it('no fd of a judged path reaches the program, with or without a spawner', {
        skip: noSpawner,
      }, async () => {
        const dir = tempDir('cordon-fdleak-', { mode: 0o777, parent: '/var/tmp' })
        const spawner = await openSpawner()
        try {
          for (const via of [{}, { spawner }]) {
            const r = await run(['sh', '-c', 'ls /proc/self/fd; mktemp -p . >/dev/null && echo wrote'], {
              isolation,
              cwd: dir,
              writable: [dir],
              ...(isolation === 'namespace' ? { hide: ['/var/tmp'] } : {}),
              ...via,
            })
            assert.equal(r.status, 'ok', r.stderr)
            // stdio, ls's own directory fd, and the log channel: nothing else.
            assert.deepEqual(r.stdout.trim().split('\n'), ['0', '1', '2', '3', '6', 'wrote'])
          }
        } finally {
          await spawner.close()
        }
      })
    })
  }
})

function readlinkOr(p: string): string {
  const out = spawnSync('readlink', ['-f', p], { encoding: 'utf8' }).stdout.trim()
  return out || p
}

describe('filesystem (namespace tier): what the host keeps to itself', { skip: noNamespace }, () => {
  const isolation = 'namespace'

  it('started from its home, cordon shows the home but hides its dot-entries; naming one shows it', async () => {
    const home = tempDir('cordon-home-', { mode: 0o755, parent: '/var/tmp' })
    mkdirSync(path.join(home, '.ssh'), { mode: 0o755 })
    writeFileSync(path.join(home, '.ssh', 'id_x'), 'PRIVATE KEY', { mode: 0o644 })
    writeFileSync(path.join(home, '.netrc'), 'password hunter2', { mode: 0o644 })
    mkdirSync(path.join(home, '.config'), { mode: 0o777 })
    chmodSync(path.join(home, '.config'), 0o777)
    writeFileSync(path.join(home, 'notes.txt'), 'plain', { mode: 0o644 })
    // A dotfile manager's links: what they lead to inside the home is as secret as the entries themselves.
    mkdirSync(path.join(home, 'dotfiles', 'aws'), { recursive: true, mode: 0o755 })
    writeFileSync(path.join(home, 'dotfiles', 'aws', 'credentials'), 'aws_secret_access_key', { mode: 0o644 })
    symlinkSync('dotfiles/aws', path.join(home, '.aws'))
    const saved = process.env.HOME
    process.env.HOME = home // cordon's own home: the default hide
    try {
      const r = await run(
        [
          'sh',
          '-c',
          'cat notes.txt; echo; cat .ssh/id_x .netrc .aws/credentials dotfiles/aws/credentials 2>&1 | grep -c -e KEY -e hunter2 -e aws_secret; ls -A .ssh | wc -l',
        ],
        { isolation, cwd: home },
      )
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, 'plain\n0\n0\n')
      // Named, it shows (writable here): the rest stays hidden.
      const named = await run(
        ['sh', '-c', 'touch .config/ok && echo ok; cat .ssh/id_x 2>/dev/null | wc -c'],
        {
          isolation,
          cwd: home,
          writable: [path.join(home, '.config')],
        },
      )
      assert.equal(named.stdout, 'ok\n0\n', named.stderr)
    } finally {
      process.env.HOME = saved
    }
  })

  it("a writable home's symlinked dot-entry is refused: a run could repoint it and unhide its target", async () => {
    // A symlink cannot be pinned by a mount: a run with the home writable removed ~/.ssh (-> dotfiles/ssh),
    // and the next run with the same policy no longer hid dotfiles/ssh and read the key.
    const home = tempDir('cordon-home-', { mode: 0o755, parent: '/var/tmp' })
    chmodSync(home, 0o777) // writable by the sandbox's uid when cordon runs as root
    mkdirSync(path.join(home, 'dotfiles', 'ssh'), { recursive: true, mode: 0o755 })
    writeFileSync(path.join(home, 'dotfiles', 'ssh', 'id_x'), 'PRIVATE KEY', { mode: 0o644 })
    symlinkSync('dotfiles/ssh', path.join(home, '.ssh'))
    const saved = process.env.HOME
    process.env.HOME = home // cordon's own home: the default hide
    const attempt = async (command: string, policy: RunOptions) => {
      try {
        const r = await run(['sh', '-c', command], policy)
        return r.stdout + r.stderr
      } catch (e) {
        if (!(e instanceof PolicyError)) throw e
        return `refused ${e.field}: ${e.message}`
      }
    }
    try {
      const policy: RunOptions = { isolation, cwd: home, writable: [home] }
      const first = await attempt('cat .ssh/id_x dotfiles/ssh/id_x; rm .ssh && echo unlinked', policy)
      const second = await attempt('cat dotfiles/ssh/id_x; echo ran', policy)
      assert.doesNotMatch(first + second, /KEY/)
      assert.match(first, /^refused writable\.0: .*\.ssh .*symlink.*hide/)
      assert.equal(readlinkOr(path.join(home, '.ssh')), path.join(realpathSync(home), 'dotfiles', 'ssh'))
      // Hidden by name instead, its target stays hidden whatever a run does to the link.
      const named: RunOptions = { ...policy, hide: [home, path.join(home, 'dotfiles', 'ssh')] }
      const third = await run(['sh', '-c', 'rm .ssh && echo unlinked; cat dotfiles/ssh/id_x'], named)
      const fourth = await run(['sh', '-c', 'cat dotfiles/ssh/id_x; echo ran'], named)
      assert.equal(third.stdout, 'unlinked\n', third.stderr)
      assert.equal(fourth.stdout, 'ran\n', fourth.stderr)
    } finally {
      process.env.HOME = saved
      rmSync(home, { recursive: true, force: true })
    }
  })

  describe("the host's unix sockets", () => {
    const listen = async () => {
      const dir = tempDir('cordon-sock-', { mode: 0o755, parent: '/var/tmp' })
      const sock = path.join(dir, 'daemon.sock')
      const server = net.createServer((c) => c.end('hello from the host\n'))
      await new Promise<void>((r) => server.listen(sock, r))
      chmodSync(sock, 0o777) // anyone may connect: only the sandbox's view stands in the way
      // Runs reuse a listing for up to SOCKETS_TTL_MS: a socket younger than that is not covered yet.
      await new Promise((r) => setTimeout(r, SOCKETS_TTL_MS + 100))
      return { sock, server }
    }
    const CONNECT = `import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print(s.recv(100).decode().strip())
except OSError as e:
    print('refused', e.errno)`

    it('a listening socket under a host directory the root shows cannot be connected to (net none)', async () => {
      const { sock, server } = await listen()
      try {
        const r = await run(['python3', '-c', CONNECT, sock], { isolation, cwd: '/' })
        assert.equal(r.status, 'ok', r.stderr)
        assert.match(r.stdout, /^refused \d+\n$/)
        // The host network (documented): the host's sockets stay reachable.
        const host = await run(['python3', '-c', CONNECT, sock], { isolation, cwd: '/', network: 'host' })
        assert.equal(host.stdout, 'hello from the host\n')
      } finally {
        server.close()
      }
    })

    it('a socket listed but gone since fails no run (the listing is reused for a moment)', async () => {
      const { sock, server } = await listen()
      assert.equal((await run(['true'], { isolation, cwd: '/' })).status, 'ok') // listed, covered
      await new Promise<void>((r) => server.close(() => r()))
      assert.equal(existsSync(sock), false)
      const r = await run(['true'], { isolation, cwd: '/' })
      assert.equal(r.status, 'ok', r.stderr)
    })

    it('nor with a network allowlist', {
      skip: probeCapabilities().bridge ? false : "cordon's network bridge is not built",
    }, async () => {
      const { sock, server } = await listen()
      try {
        const r = await run(['python3', '-c', CONNECT, sock], {
          isolation,
          cwd: '/',
          network: { allow: ['example.com'] },
        })
        assert.equal(r.status, 'ok', r.stderr)
        assert.match(r.stdout, /^refused \d+\n$/)
      } finally {
        server.close()
      }
    })
  })

  describe('/sys/fs/cgroup', () => {
    const cgroup = probeCapabilities().cgroup
    const noCgroup = cgroup.version === null ? `no cgroup for sandboxes: ${cgroup.reason}` : false

    it('shows the sandbox its own cgroup and no other run', { skip: noCgroup }, async () => {
      const limit = 300 * 1024 * 1024
      const file =
        cgroup.version === 1 ? '/sys/fs/cgroup/memory/memory.limit_in_bytes' : '/sys/fs/cgroup/memory.max'
      // Another run's cgroup exists meanwhile.
      const other = run(['sleep', '2'], { isolation })
      const r = await run(['sh', '-c', `cat ${file}; find /sys/fs/cgroup -name 'cordon-*' | wc -l`], {
        isolation,
        cwd: '/',
        limits: { memoryBytes: limit },
      })
      await other
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, `${limit}\n0\n`)
    })

    it("without a cgroup, shows an empty directory, never the host's", async () => {
      const r = await run(['sh', '-c', 'ls -A /sys/fs/cgroup | wc -l'], {
        isolation,
        cwd: '/',
        cgroup: { mode: 'off' },
      })
      assert.equal(r.stdout, '0\n', r.stderr)
    })
  })
})

describe('paths beneath a directory the sandbox uid cannot search', { skip: notRoot }, () => {
  // As a clone under root's 0700 home: `closed` (root's, 0700) holds the named paths and a secret beside
  // them. Under /var/lib (nobody but root can write above it: the process tier can cover it there).
  const closed = realpathSync(tempDir('cordon-test-closed-', { parent: '/var/lib', mode: 0o700 }))
  const project = path.join(closed, 'project')
  const out = path.join(project, 'out')
  const data = path.join(closed, 'data')
  mkdirSync(out, { recursive: true })
  chmodSync(project, 0o755)
  chmodSync(out, 0o777)
  mkdirSync(data, { mode: 0o755 })
  writeFileSync(path.join(data, 'f'), 'data\n', { mode: 0o644 })
  writeFileSync(path.join(closed, 'secret'), 'key\n', { mode: 0o644 })

  for (const isolation of TIERS) {
    describe(isolation, { skip: skipTier(isolation) }, () => {
      it('cwd and writable work; nothing else of the closed directory shows', async () => {
        const r = await run(
          [
            'sh',
            '-c',
            `echo x > ${out}/${isolation} && cat out/${isolation}; pwd; ls -A ${closed}; cat ${closed}/secret 2>/dev/null || echo unseen`,
          ],
          { isolation, cwd: project, writable: [out] },
        )
        assert.equal(r.status, 'ok', r.stderr)
        assert.equal(r.stdout, `x\n${project}\nproject\nunseen\n`)
        assert.equal(readFileSync(path.join(out, isolation), 'utf8'), 'x\n', 'written through to the host')
      })

      it('a cwd the sandbox uid cannot enter is refused up front, naming cwd', async () => {
        await assert.rejects(
          run(['true'], { isolation, cwd: closed }),
          (e: unknown) => e instanceof PolicyError && e.field === 'cwd' && /chmod o\+x/.test(e.message),
        )
      })
    })
  }

  it('the copies shown are private mounts: nothing propagates between them and the host', async (t) => {
    // A shared mount (as systemd makes /): a copy of it taken before the sandbox's namespace turned private
    // would join the host's peer group, and mounts would travel between host and sandbox.
    const base = realpathSync(tempDir('cordon-test-shared-', { parent: '/var/lib', mode: 0o755 }))
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs', base]).status !== 0)
      return t.skip('cannot mount a tmpfs here')
    try {
      spawnSync('mount', ['--make-shared', base])
      const shut = path.join(base, 'shut')
      const proj = path.join(shut, 'proj')
      mkdirSync(proj, { recursive: true })
      chmodSync(shut, 0o700)
      for (const isolation of TIERS) {
        if (skipTier(isolation)) continue
        const r = await run(['sh', '-c', `grep -F ' ${proj} ' /proc/self/mountinfo`], {
          isolation,
          cwd: proj,
        })
        assert.equal(r.status, 'ok', `${isolation}: ${r.stderr}`)
        assert.doesNotMatch(r.stdout, /shared:/, `${isolation}: ${r.stdout}`)
      }
    } finally {
      spawnSync('umount', ['-l', base])
    }
  })

  it('readable (strict mode, namespace tier): shown read-only, and alone', {
    skip: noNamespace,
  }, async () => {
    const r = await run(
      ['sh', '-c', `cat ${data}/f; ls -A ${closed}; touch ${data}/g 2>/dev/null || echo ro`],
      {
        isolation: 'namespace',
        cwd: '/',
        readable: [data],
      },
    )
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, 'data\ndata\nro\n')
  })

  it('the process tier refuses one others can write above, naming the field; the namespace tier covers it', {
    skip: noNamespace || noLauncher,
  }, async () => {
    const open = tempDir('cordon-test-open-', { parent: '/var/tmp', mode: 0o777 })
    const shut = path.join(open, 'shut')
    const w = path.join(shut, 'w')
    mkdirSync(w, { recursive: true })
    chmodSync(shut, 0o700)
    chmodSync(w, 0o777)
    await assert.rejects(
      run(['true'], { isolation: 'process', writable: [w] }),
      (e: unknown) =>
        e instanceof PolicyError &&
        e.field === 'writable.0' &&
        e.message.includes(`chmod o+x ${shut}, or use the namespace tier`),
    )
    const r = await run(['sh', '-c', `touch ${w}/a && ls ${shut}`], { isolation: 'namespace', writable: [w] })
    assert.equal(r.stdout, 'w\n', r.stderr)
  })
})
