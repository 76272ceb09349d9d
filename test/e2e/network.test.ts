// test: slow (every spelling of every address through both proxies: ~50 s)
// The network allowlist for real: servers this test starts on loopback, reached only through cordon's proxies.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import dgram from 'node:dgram'
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openSpawner, run, start } from '../../src/index.js'
import { listRootfs } from '../../src/rootfs/rootfs.js'
import {
  asUnprivileged,
  noLauncher,
  noNamespace,
  noSpawner,
  notRoot,
  noUnprivileged,
  tempDir,
  waitFor,
} from '../helpers.js'

/** The tree test/e2e/rootfs.test.ts builds (with busybox); an allowlist on it is tested here when it exists. */
const ROOTFS = 'cordon-test-minbase'
const noRootfs = () =>
  noNamespace ||
  (listRootfs().some((r) => r.name === ROOTFS)
    ? false
    : `the root filesystem ${ROOTFS} is not built (test/e2e/rootfs.test.ts builds it with debootstrap)`)

describe('network allowlist (namespace tier)', { skip: noNamespace }, () => {
  let server: http.Server
  let port = 0
  before(async () => {
    server = http.createServer((req, res) => res.end(`hello ${req.url}\n`))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    port = (server.address() as net.AddressInfo).port
  })
  after(() => server.close())
  const curl = (...args: string[]) => ['curl', '-sS', '--max-time', '5', ...args]

  it('HTTP through the proxy env reaches an allowed host; the connection is an event', async () => {
    const r = await run(curl(`http://localhost:${port}/a`), {
      network: { allow: [`localhost:${port}`], allowLoopback: true },
    })
    assert.equal(r.stdout, 'hello /a\n')
    assert.deepEqual(r.network, [
      { host: 'localhost', port, allowed: true, code: 'connected', reason: 'connected to 127.0.0.1' },
    ])
  })

  it('CONNECT tunnels and SOCKS5 work too', async () => {
    const policy = { network: { allow: ['localhost'], allowLoopback: true } }
    assert.equal((await run(curl('-p', `http://localhost:${port}/t`), policy)).stdout, 'hello /t\n')
    const socks = await run(curl('--socks5-hostname', '127.0.0.1:1080', `http://localhost:${port}/s`), policy)
    assert.equal(socks.stdout, 'hello /s\n')
  })

  it('refusals are events and the run goes on: not allowed, denied, loopback without allowLoopback', async () => {
    const script = [
      `curl -sS --max-time 5 -p http://localhost:${port}/x || true`,
      `curl -sS --max-time 5 -p http://127.0.0.1:${port}/y || true`,
      'echo still running',
    ].join('; ')
    const r = await run(['sh', '-c', script], { network: { allow: ['localhost'], deny: ['127.0.0.1'] } })
    assert.equal(r.status, 'ok')
    assert.match(r.stdout, /still running/)
    assert.deepEqual(
      r.network.map((e) => [e.host, e.allowed, e.reason.replace(/\d+\.\d+\.\d+\.\d+/, 'IP')]),
      [
        // The deny of 127.0.0.1 holds for the address localhost resolves to, too.
        ['localhost', false, 'IP is denied by 127.0.0.1'],
        ['127.0.0.1', false, 'denied by IP'],
      ],
    )
  })

  it('wildcards match subdomains only', async () => {
    const r = await run(['sh', '-c', `curl -sS --max-time 5 -p http://localhost:${port}/ || true`], {
      network: { allow: ['*.localhost'], allowLoopback: true },
    })
    assert.equal(r.network[0]?.reason, 'not on the allow list')
  })

  it('a program that ignores the proxy and opens a raw TCP connection gets nowhere', async () => {
    const r = await run(curl('--noproxy', '*', `http://127.0.0.1:${port}/raw`), {
      network: { allow: ['localhost'], allowLoopback: true },
    })
    assert.equal(r.status, 'nonzero-exit')
    assert.match(r.stderr, /Failed to connect|Couldn't connect/)
    assert.deepEqual(r.network, [])
  })

  it('pipelined requests take turns: 33 answered in order, then a 503 and the connection closes', async () => {
    const pipeline = String.raw`
import re, socket, sys
s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
s.sendall(b''.join(b'GET http://localhost:%s/p%d HTTP/1.1\r\nHost: localhost\r\n\r\n' % (sys.argv[1].encode(), i) for i in range(40)))
data = b''
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(' '.join(m.decode() for m in re.findall(rb'HTTP/1\.1 (\d+)', data)))
print(' '.join(m.decode() for m in re.findall(rb'hello /(p\d+)', data)))
`
    const r = await run(['python3', '-c', pipeline, String(port)], {
      network: { allow: [`localhost:${port}`], allowLoopback: true },
    })
    assert.equal(r.status, 'ok', r.stderr)
    const [statuses, bodies] = r.stdout.trim().split('\n')
    assert.equal(statuses, [...Array<string>(33).fill('200'), '503'].join(' '))
    assert.equal(bodies, Array.from({ length: 33 }, (_, i) => `p${i}`).join(' '), 'in order')
  })

  it('the CLI form: --net allow:HOST:PORT,+loopback', async () => {
    const cli = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
    const args = [
      cli,
      'run',
      '--json',
      '--net',
      `allow:localhost:${port},+loopback`,
      '--',
      ...curl(`http://localhost:${port}/cli`),
    ]
    // Asynchronously: the server answering it lives on this test's event loop.
    const child = spawn(process.execPath, args)
    let stdout = ''
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString()
    })
    await new Promise((resolve) => child.on('close', resolve))
    const result = JSON.parse(stdout)
    assert.equal(result.stdout, 'hello /cli\n')
    assert.equal(result.network[0].allowed, true)
  })

  it('the CLI says on stderr which connections the policy refused when the program failed, not when it succeeded', async () => {
    const cli = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
    const cordon = async (script: string) => {
      const child = spawn(process.execPath, [
        cli,
        'run',
        '--net',
        `allow:localhost:${port},no-such-name.invalid,+loopback`,
        '--',
        'sh',
        '-c',
        script,
      ])
      let stderr = ''
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString()
      })
      child.stdout.resume()
      const status = await new Promise((resolve) => child.on('close', resolve))
      return { status, stderr }
    }
    const tries = [
      `curl -s -o /dev/null -p http://evil.test/`,
      `curl -s -o /dev/null -p http://127.0.0.1:${port}/`,
      `curl -s -o /dev/null -p http://no-such-name.invalid/`,
      `curl -s -o /dev/null http://localhost:${port}/`,
    ].join('; ')
    const failed = await cordon(`${tries}; exit 7`)
    assert.equal(failed.status, 7)
    assert.equal(
      failed.stderr,
      `cordon: the network policy refused 2 connections: evil.test:80 (not-allowed), 127.0.0.1:${port} (not-allowed); ` +
        'allowed but failed 1 connection: no-such-name.invalid:80 (unresolvable) (network in --json)\n',
    )
    const ok = await cordon(`${tries}; exit 0`)
    assert.deepEqual(ok, { status: 0, stderr: '' })
  })

  it("a run's proxy sockets are its own: another sandbox uid cannot reach them", {
    skip: notRoot || noLauncher,
  }, async () => {
    const proxyDirs = () =>
      readdirSync(os.tmpdir())
        .filter((name) => name.startsWith('cordon-net-'))
        .map((name) => path.join(os.tmpdir(), name))
    const before = new Set(proxyDirs())
    const owner = start(['sleep', '30'], { network: { allow: [`localhost:${port}`], allowLoopback: true } })
    try {
      let dir = ''
      assert.ok(
        await waitFor(() => {
          dir = proxyDirs().find((d) => !before.has(d)) ?? ''
          return dir !== ''
        }, 5000),
        'the run made its proxy directory',
      )
      // Root's, searchable; the sockets are the sandbox uid's alone (0600).
      const mode = statSync(dir).mode & 0o777
      assert.equal(mode, 0o711, `proxy directory mode ${mode.toString(8)}`)
      assert.equal(statSync(dir).uid, 0)
      const sock = statSync(path.join(dir, 'http.sock'))
      assert.ok(
        sock.uid >= 60000 && (sock.mode & 0o777) === 0o600,
        `socket ${sock.uid} ${sock.mode.toString(8)}`,
      )
      const probe =
        'import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n  s.connect(sys.argv[1]); print("connected")\nexcept OSError as e:\n  print("refused", e.errno)'
      const other = await run(['python3', '-c', probe, path.join(dir, 'http.sock')], { isolation: 'process' })
      assert.match(other.stdout, /^refused/, other.stderr)
    } finally {
      owner.kill()
      await owner.result
    }
  })

  it("as root, a sandbox that can write the proxy directory's parent cannot make root unlink through it", {
    skip: notRoot || noLauncher,
  }, async () => {
    // The host's TMPDIR is a sticky world-writable directory the sandbox may write (as with --writable /tmp).
    const tmp = tempDir('cordon-tmpdir-', { mode: 0o1777 })
    const victim = tempDir('cordon-victim-', { mode: 0o755 })
    for (const name of ['bridge', 'http.sock', 'socks.sock']) writeFileSync(path.join(victim, name), 'keep')
    // Moves its run's proxy directory away and puts a link to the victim in its place.
    const swap = `cd ${tmp} && for d in cordon-net-*; do mv "$d" moved && ln -s ${victim} "$d" && echo swapped; done`
    const saved = process.env.TMPDIR
    process.env.TMPDIR = tmp
    let r: Awaited<ReturnType<typeof run>>
    try {
      r = await run(['sh', '-c', swap], {
        isolation: 'namespace',
        writable: [tmp],
        network: { allow: [`localhost:${port}`], allowLoopback: true },
      })
    } finally {
      if (saved === undefined) delete process.env.TMPDIR
      else process.env.TMPDIR = saved
    }
    assert.deepEqual(readdirSync(victim).sort(), ['bridge', 'http.sock', 'socks.sock'], r.stdout + r.stderr)
    assert.doesNotMatch(r.stdout, /swapped/, 'the proxy directory could not be moved')
    for (const name of readdirSync(tmp)) rmSync(path.join(tmp, name), { recursive: true, force: true })
  })

  it("another sandbox of the same uid that connects to a run's proxy socket gets nothing through it", {
    skip: noLauncher || noUnprivileged(),
  }, async () => {
    // As an unprivileged host every sandbox runs as cordon's own uid: file modes cannot keep them apart.
    const steal = String.raw`
import socket, sys
out = []
for name, data in (('http.sock', b'GET http://localhost:%s/stolen HTTP/1.1\r\nHost: localhost\r\n\r\n' % sys.argv[2].encode()),
                   ('http.sock', b'0' * 64 + b'\nGET http://localhost:%s/guessed HTTP/1.1\r\nHost: localhost\r\n\r\n' % sys.argv[2].encode()),
                   ('socks.sock', b'\x05\x01\x00\x05\x01\x00\x03\x09localhost' + int(sys.argv[2]).to_bytes(2, 'big') + b'GET /socks HTTP/1.0\r\n\r\n')):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    got = b''
    try:
        s.connect(sys.argv[1] + '/' + name)
        s.sendall(data)
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        out.append(repr(got))
    except OSError as e:
        out.append('%r, then error %s' % (got, e.errno))
print(' | '.join(out))
`
    type Out = { other: string; otherStatus: string; network: unknown[]; dir: string }
    const out = await asUnprivileged<Out>(`
      const { readdirSync } = await import('node:fs')
      const dirs = () => readdirSync('/tmp').filter((n) => n.startsWith('cordon-net-'))
      const before = new Set(dirs())
      const owner = start(['sleep', '30'], { network: { allow: ['localhost:${port}'], allowLoopback: true } })
      let dir
      for (let i = 0; i < 250 && !dir; i++) {
        dir = dirs().find((d) => !before.has(d))
        await new Promise((r) => setTimeout(r, 20))
      }
      const other = await run(['python3', '-c', ${JSON.stringify(steal)}, '/tmp/' + dir, '${port}'], {
        isolation: 'process', limits: { wallTimeMs: 20000 },
      })
      owner.kill()
      const r = await owner.result
      return { other: other.stdout + other.stderr, otherStatus: other.status, network: r.network, dir }
    `)
    assert.ok(out.dir, 'the run made its proxy directory')
    assert.equal(out.otherStatus, 'ok', out.other)
    assert.doesNotMatch(out.other, /hello|x05\\x00\\x05\\x00/, out.other)
    assert.deepEqual(out.network, [], "the other sandbox's attempts are not this run's traffic")
  })

  it("the program sees no token: not on an fd, in an argv or environment, nor in the relay's memory", async () => {
    const look = String.raw`
import os, re
token = re.compile(rb'[0-9a-f]{64}\n')
out = ['fds ' + ' '.join(sorted(os.listdir('/proc/self/fd'), key=int))]
relays = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    for what in ('cmdline', 'environ'):
        try:
            if token.search(open('/proc/%s/%s' % (pid, what), 'rb').read()):
                out.append('token in %s/%s' % (pid, what))
        except OSError:
            pass
    try:
        if open('/proc/%s/cmdline' % pid, 'rb').read().startswith(b'/tmp/.cordon-net/bridge\0'):
            relays.append(pid)
    except OSError:
        pass
out.append('relays %d' % len(relays))
for pid in relays:
    for what in ('mem', 'environ', 'fd/3'):
        try:
            open('/proc/%s/%s' % (pid, what), 'rb').read(1)
            out.append('read %s' % what)
        except OSError as e:
            out.append('%s refused' % what)
print('\n'.join(out))
`
    const r = await run(['python3', '-c', look], { network: { allow: ['example.com'] } })
    assert.equal(r.status, 'ok', r.stderr)
    const lines = r.stdout.trim().split('\n')
    assert.doesNotMatch(lines[0] ?? '', /\b9\b/, 'fd 9 (the token) is closed before the program runs')
    assert.doesNotMatch(r.stdout, /token in|read /, r.stdout)
    assert.deepEqual(lines.slice(1), ['relays 1', 'mem refused', 'environ refused', 'fd/3 refused'])
  })

  it('an allowlist works through a spawner too (the token on a pipe of its own)', {
    skip: noSpawner,
  }, async () => {
    const spawner = await openSpawner()
    try {
      const r = await run(curl(`http://localhost:${port}/spawned`), {
        spawner,
        network: { allow: [`localhost:${port}`], allowLoopback: true },
      })
      assert.equal(r.stdout, 'hello /spawned\n', r.stderr)
    } finally {
      await spawner.close()
    }
  })

  it('a root filesystem with an allowlist reaches an allowed host (the bridge is bound in)', {
    skip: noRootfs(),
    timeout: 60_000,
  }, async () => {
    const r = await run(['busybox', 'wget', '-q', '-O', '-', `http://localhost:${port}/rootfs`], {
      rootfs: ROOTFS,
      network: { allow: [`localhost:${port}`], allowLoopback: true },
      limits: { wallTimeMs: 20_000 },
    })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, 'hello /rootfs\n')
    assert.equal(r.network[0]?.allowed, true)
  })

  it('the process tier refuses an allowlist rather than run without it', async () => {
    const r = await run(['true'], { isolation: 'process', network: { allow: ['localhost'] } })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'network')
  })
})

/**
 * Raw proxy clients run inside the sandbox (python3): each case prints one line with what the proxy
 * answered. Cases: ["socks", atyp, hex address] or ["http", request line (without CRLFs)].
 */
const PROBE = String.raw`
import json, socket, sys
def socks(atyp, addr, port):
    s = socket.create_connection(('127.0.0.1', 1080), timeout=5)
    s.sendall(b'\x05\x01\x00')
    if s.recv(2) != b'\x05\x00':
        return 'no greeting'
    head = bytes([5, 1, 0, atyp]) + (bytes([len(addr)]) if atyp == 3 else b'')
    s.sendall(head + addr + port.to_bytes(2, 'big'))
    r = s.recv(10)
    return 'socks %d' % r[1] if len(r) >= 2 else 'closed'
def http(line):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=5)
    s.sendall(line.encode('latin1') + b'\r\nHost: x\r\n\r\n')
    data = b''
    while b'\r\n' not in data:
        try:
            b = s.recv(4096)
        except OSError:
            break
        if not b:
            break
        data += b
    return data.split(b'\r\n')[0].decode('latin1') or 'closed'
port = int(sys.argv[1])
for case in json.loads(sys.argv[2]):
    try:
        print(socks(case[1], bytes.fromhex(case[2]), port) if case[0] == 'socks' else http(case[1].replace('PORT', str(port))))
    except OSError as e:
        print('error', e)
`

type ProbeCase = ['socks', number, string] | ['http', string]
const text = (s: string) => Buffer.from(s, 'latin1').toString('hex')

describe('network allowlist: every spelling of a host, bounded host side (namespace tier)', {
  skip: noNamespace,
}, () => {
  let server: http.Server
  let port = 0
  let requests = 0
  before(async () => {
    server = http.createServer((req, res) => {
      requests++
      res.end(`hello ${req.url}\n`)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    port = (server.address() as net.AddressInfo).port
  })
  after(() => server.close())

  const probe = async (cases: ProbeCase[], network: object) => {
    const seen = requests
    const r = await run(['python3', '-c', PROBE, String(port), JSON.stringify(cases)], {
      network,
      limits: { wallTimeMs: 30_000 },
    })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(requests, seen, `the test server was reached: ${r.stdout}`)
    return r
  }
  /** `host` asked for three ways: a SOCKS5 name, an HTTP CONNECT and an absolute-URI GET (IPv6 bracketed). */
  const threeWays = (host: string): ProbeCase[] => {
    const at = host.includes(':') ? `[${host}]` : host
    return [
      ['socks', 3, text(host)],
      ['http', `CONNECT ${at}:PORT HTTP/1.1`],
      ['http', `GET http://${at}:PORT/ HTTP/1.1`],
    ]
  }
  /** Every connection recorded, and each refused with `code` and a reason matching `reason`. */
  const allRefused = (
    r: Awaited<ReturnType<typeof probe>>,
    cases: ProbeCase[],
    code: string,
    reason: RegExp,
  ) => {
    assert.equal(r.network.length, cases.length, JSON.stringify(r.network))
    for (const e of r.network) {
      assert.equal(e.allowed, false, JSON.stringify(e))
      assert.equal(e.code, code, JSON.stringify(e))
      assert.match(e.reason, reason, JSON.stringify(e))
    }
  }

  it('a SOCKS5 name with a NUL byte is refused, recorded escaped, and never resolved', async () => {
    const r = await probe([['socks', 3, text('localhost\0.example.com')]], {
      allow: ['*.example.com'],
      allowLoopback: true,
    })
    assert.equal(r.stdout, 'socks 2\n')
    assert.deepEqual(r.network, [
      {
        host: 'localhost\\u0000.example.com',
        port,
        allowed: false,
        code: 'malformed-host',
        reason: 'not a host name or IP address',
      },
    ])
  })

  it('names that are not names, and addresses that are not canonical, are refused through both proxies', async () => {
    const bad = [
      'localhost\0.example.com',
      'localhost .example.com',
      'localhost\t.example.com',
      'localhost%00.example.com',
      '127.1',
      '2130706433',
      '0x7f.1',
      '0x7f000001',
      '0177.0.0.1',
      '127.0.0.01',
      '127.0.0.1.',
      'a.example.com\n',
      'a..example.com',
      '-a.example.com',
      `${'a'.repeat(64)}.example.com`,
      `${'a.'.repeat(122)}example.com`,
      'é.example.com',
      '::1%lo',
      '[::1]',
      '1.2.3.4.5',
      '',
    ]
    const cases: ProbeCase[] = bad.map((h) => ['socks', 3, text(h)])
    for (const h of [
      '127.1',
      '0x7f.1',
      '2130706433',
      'localhost%00.example.com',
      '[::1%25lo]',
      '1.2.3',
      'a,b',
    ])
      cases.push(['http', `CONNECT ${h}:PORT HTTP/1.1`])
    const r = await probe(cases, { allow: ['*.example.com'], allowLoopback: true })
    const lines = r.stdout.trim().split('\n')
    assert.equal(lines.length, cases.length, r.stdout)
    for (const [i, line] of lines.entries())
      assert.match(line, /^(socks [1-8]|HTTP\/1\.1 4\d\d)/, String(cases[i]))
    assert.equal(r.network.length, cases.length, JSON.stringify(r.network))
    for (const e of r.network) {
      assert.equal(e.allowed, false)
      assert.equal(e.reason, 'not a host name or IP address', JSON.stringify(e))
      assert.match(e.host, /^[\x20-\x7e]{0,300}$/, 'the raw host is shown escaped and cut')
    }
    assert.equal(r.network[0]?.host, 'localhost\\u0000.example.com')
  })

  it('every refusal, whatever the spelling or the proxy, is answered at once and is an event with its code', async () => {
    // Spellings Node's HTTP parser refuses itself (a NUL, a control character, a space, a byte above 0x7f)
    // were answered 400 with no event; an absolute URI went through a URL parser that decoded %-escapes.
    const hosts: [string, string][] = [
      ['a\0b.example.com', 'malformed-host'],
      ['a\x01.example.com', 'malformed-host'],
      ['a\x1b.example.com', 'malformed-host'],
      ['a\x7f.example.com', 'malformed-host'],
      ['a\xff.example.com', 'malformed-host'],
      ['a b.example.com', 'malformed-host'],
      ['a%00.example.com', 'malformed-host'],
      ['ex%61mple.com', 'malformed-host'],
      ['xn--.example.com', 'malformed-host'],
      ['0x7f.1', 'malformed-host'],
      ['0177.0.0.1', 'malformed-host'],
      ['127.1', 'malformed-host'],
      [`${'a'.repeat(300)}.example.com`, 'malformed-host'],
      ['::1%25eth0', 'malformed-host'],
      ['::ffff:7f00:1', 'not-allowed'],
      ['0:0:0:0:0:0:0:1', 'not-allowed'],
      ['EVIL.TEST.', 'not-allowed'],
    ]
    const cases: ProbeCase[] = hosts
      .flatMap(([h]) => threeWays(h))
      .filter((c) => c[0] !== 'socks' || c[2].length <= 510)
    const mapped = Buffer.alloc(16)
    mapped.writeUInt16BE(0xffff, 10)
    mapped.writeUInt32BE(0x7f000001, 12)
    cases.push(['socks', 4, mapped.toString('hex')], ['socks', 3, ''])
    const r = await probe(cases, { allow: ['*.example.com'] })
    const lines = r.stdout.trim().split('\n')
    assert.equal(lines.length, cases.length, r.stdout)
    for (const [i, line] of lines.entries())
      assert.match(line, /^(socks 2|HTTP\/1\.1 40[03])/, `${JSON.stringify(cases[i])}: ${line}`)
    assert.ok(r.wallMs < 20_000, `${cases.length} refusals took ${r.wallMs} ms`)
    assert.equal(r.network.length, cases.length, JSON.stringify(r.network))
    const expected = [
      ...hosts.flatMap(([h, code]) => Array(h.length > 255 ? 2 : 3).fill(code)),
      'not-allowed',
      'malformed-host',
    ]
    assert.deepEqual(
      r.network.map((e) => e.code),
      expected,
      JSON.stringify(r.network.map((e) => [e.host, e.code])),
    )
    for (const e of r.network) {
      assert.equal(e.allowed, false)
      assert.match(e.host, /^[\x20-\x7e]{0,300}$/, 'the host as sent, escaped and cut')
    }
    // As sent: a NUL escaped, a mapped address as it was written (read as 127.0.0.1 in the reason).
    assert.equal(r.network[0]?.host, 'a\\u0000b.example.com')
    assert.equal(r.network[1]?.host, 'a\\u0000b.example.com', 'through the HTTP parser too')
    const mappedEvents = r.network.filter((e) => e.host.replace(/^\[|\]$/g, '') === '::ffff:7f00:1')
    assert.equal(mappedEvents.length, 4)
    for (const e of mappedEvents) assert.equal(e.reason, 'not on the allow list (read as 127.0.0.1)')
  })

  it('an allowed name that does not resolve is answered otherwise than a forbidden one (curl says which)', async () => {
    const script = [
      'curl -sS --max-time 20 -p http://no-such-name.invalid/ 2>&1',
      'curl -sS --max-time 20 -p http://evil.test/ 2>&1',
      'curl -sS --max-time 20 --socks5-hostname 127.0.0.1:1080 http://no-such-name.invalid/ 2>&1',
      'curl -sS --max-time 20 --socks5-hostname 127.0.0.1:1080 http://evil.test/ 2>&1',
      'curl -sS --max-time 20 -x http://127.0.0.1:3128 http://no-such-name.invalid/',
      'curl -sS --max-time 20 -x http://127.0.0.1:3128 http://evil.test/',
    ].join('; echo; ')
    const r = await run(['sh', '-c', script], {
      network: { allow: ['no-such-name.invalid'] },
      limits: { wallTimeMs: 60_000 },
    })
    const lines = r.stdout.split('\n').filter((l) => l.trim())
    assert.match(lines[0]!, /502/, r.stdout)
    assert.match(lines[1]!, /403/, r.stdout)
    assert.match(lines[2]!, /\(4\)|unreachable/i, r.stdout)
    assert.match(lines[3]!, /\(2\)|not allowed/i, r.stdout)
    assert.match(lines[4]!, /cordon: cannot resolve/, r.stdout)
    assert.match(lines[5]!, /cordon: not on the allow list/, r.stdout)
    assert.deepEqual(
      r.network.map((e) => [e.host, e.allowed, e.code]),
      [
        ['no-such-name.invalid', true, 'unresolvable'],
        ['evil.test', false, 'not-allowed'],
        ['no-such-name.invalid', true, 'unresolvable'],
        ['evil.test', false, 'not-allowed'],
        ['no-such-name.invalid', true, 'unresolvable'],
        ['evil.test', false, 'not-allowed'],
      ],
    )
  })

  it('every IPv6 spelling of a loopback address is loopback, through both proxies', async () => {
    const spellings = [
      '::ffff:7f00:1',
      '::ffff:127.0.0.1',
      '0:0:0:0:0:0:0:1',
      '::127.0.0.1',
      '64:ff9b::7f00:1',
      '::ffff:0:127.0.0.1',
      '2002:7f00:1::',
      '::',
    ]
    const cases = spellings.flatMap(threeWays)
    const v4mapped = Buffer.alloc(16)
    v4mapped.writeUInt16BE(0xffff, 10)
    v4mapped.writeUInt32BE(0x7f000001, 12)
    cases.push(['socks', 4, v4mapped.toString('hex')])
    allRefused(await probe(cases, { allow: spellings.map((h) => `[${h}]`) }), cases, 'loopback', /loopback/)
  })

  it('cloud metadata in every spelling is refused with allowPrivate, through both proxies', async () => {
    // allowPrivate (a private mirror) must not hand the sandbox the host's cloud credentials too.
    const spellings = [
      '169.254.169.254',
      '::ffff:a9fe:a9fe',
      '64:ff9b::a9fe:a9fe',
      'fd00:ec2::254',
      '168.63.129.16',
    ]
    const cases = spellings.flatMap(threeWays)
    const allow = spellings.map((h) => (h.includes(':') ? `[${h}]` : h))
    const r = await probe(cases, { allow, allowPrivate: true })
    allRefused(r, cases, 'metadata', /cloud metadata address \(allowMetadata is off\)/)
  })

  it('a deny of an IPv4 address holds for its IPv6 spellings', async () => {
    const cases: ProbeCase[] = [
      ['http', 'CONNECT [::ffff:7f00:1]:PORT HTTP/1.1'],
      ['http', 'GET http://[::ffff:127.0.0.1]:PORT/ HTTP/1.1'],
      ['socks', 3, text('::ffff:127.0.0.1')],
      ['socks', 3, text('::127.0.0.1')],
    ]
    const r = await probe(cases, {
      allow: ['[::ffff:7f00:1]', '[::127.0.0.1]'],
      deny: ['127.0.0.1'],
      allowLoopback: true,
    })
    assert.equal(r.network.length, cases.length, JSON.stringify(r.network))
    for (const e of r.network) assert.match(e.reason, /^denied by 127\.0\.0\.1/, JSON.stringify(e))
  })

  it('data a sandbox sends after a refused SOCKS5 request is not kept: the host does not grow', async (t) => {
    const flood = String.raw`
import socket, time
total, attempts, start = 0, 0, time.time()
chunk = b'x' * (1 << 20)
while total < (512 << 20) and time.time() - start < 20:
    attempts += 1
    try:
        s = socket.create_connection(('127.0.0.1', 1080), timeout=5)
        s.sendall(b'\x05\x01\x00')
        s.recv(2)
        s.sendall(bytes([5, 1, 0, 3, 11]) + b'not.allowed' + (80).to_bytes(2, 'big'))
        while total < (512 << 20):
            total += s.send(chunk)
    except OSError:
        pass
    s.close()
print(total >> 20, attempts)
`
    const { monitorEventLoopDelay } = await import('node:perf_hooks')
    const delay = monitorEventLoopDelay({ resolution: 10 })
    const base = process.memoryUsage().rss
    let peak = base
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss)
    }, 20)
    delay.enable()
    const r = await run(['python3', '-c', flood], {
      network: { allow: ['example.com'] },
      limits: { wallTimeMs: 60_000 },
    })
    delay.disable()
    clearInterval(sampler)
    const growth = (peak - base) / 2 ** 20
    t.diagnostic(
      `sandbox sent ${r.stdout.trim()} (MiB, attempts); host RSS +${growth.toFixed(1)} MiB; event loop delay max ${(delay.max / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms`,
    )
    assert.equal(r.status, 'ok', r.stderr)
    assert.ok(growth < 64, `host RSS grew by ${growth.toFixed(1)} MiB`)
  })

  it('20 000 refused requests: network keeps at most 1000 events, networkDropped counts the rest', async () => {
    const many = String.raw`
import socket
s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
n, got, buf = 20000, 0, b''
# Pipelined 25 at a time: past 32 waiting on one connection the proxy answers 503 and closes it.
for batch in range(0, n, 25):
    s.sendall(b''.join(b'GET http://h%d.%s.not-allowed.test/ HTTP/1.1\r\nHost: x\r\n\r\n' % (i, b'a' * 200) for i in range(batch, batch + 25)))
    while got < batch + 25:
        more = s.recv(65536)
        if not more:
            raise SystemExit('closed after %d' % got)
        buf += more
        got = buf.count(b'HTTP/1.1 403')
print(got)
`
    const r = await run(['python3', '-c', many], {
      network: { allow: ['example.com'] },
      limits: { wallTimeMs: 120_000 },
    })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, '20000\n')
    assert.equal(r.network.length, 1000)
    assert.equal((r as { networkDropped?: number }).networkDropped, 19_000)
    assert.ok(JSON.stringify(r).length < 1 << 20, 'the result stays small')
  })
})

describe('network allowlist: one judgement per request, and no way out but the proxies (namespace tier)', {
  skip: noNamespace,
}, () => {
  let server: http.Server
  let port = 0
  const hosts: string[] = []
  let udp: dgram.Socket
  let udpPort = 0
  let datagrams = 0
  before(async () => {
    server = http.createServer((req, res) => {
      hosts.push(`${req.url} ${req.headers.host}`)
      res.end(`hello ${req.url}\n`)
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    port = (server.address() as net.AddressInfo).port
    udp = dgram.createSocket('udp4')
    udp.on('message', () => datagrams++)
    await new Promise<void>((r) => udp.bind(0, '0.0.0.0', r))
    udpPort = udp.address().port
  })
  after(() => {
    server.close()
    udp.close()
  })

  it('requests on one kept-alive connection are each judged; Host names the allowed host, not the one sent', async () => {
    const script = String.raw`
import re, socket, sys
port = sys.argv[1]
s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
reqs = [b'GET http://localhost:%s/a HTTP/1.1\r\nHost: evil.test\r\n\r\n',
        b'GET http://127.0.0.1:%s/b HTTP/1.1\r\nHost: localhost\r\n\r\n',
        b'GET http://localhost.:%s/c HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n']
s.sendall(b''.join(r % port.encode() for r in reqs))
data = b''
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(' '.join(m.decode() for m in re.findall(rb'HTTP/1\.1 (\d+)', data)))
`
    const seen = hosts.length
    const r = await run(['python3', '-c', script, String(port)], {
      network: { allow: [`localhost:${port}`], allowLoopback: true },
    })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, '200 403 200\n')
    // As judged: `localhost.` is the name localhost.
    assert.deepEqual(hosts.slice(seen), [`/a localhost:${port}`, `/c localhost:${port}`])
    // Each host as the sandbox sent it.
    assert.deepEqual(
      r.network.map((e) => [e.host, e.allowed]),
      [
        ['localhost', true],
        ['127.0.0.1', false],
        ['localhost.', true],
      ],
    )
  })

  it('UDP to the host, its interfaces or its resolver, and names the sandbox resolves itself, reach nothing', async () => {
    const own = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i?.family === 'IPv4')
      .map((i) => i!.address)
    const resolvers = /^nameserver\s+(\d+\.\d+\.\d+\.\d+)/gm
    const conf = (() => {
      try {
        return readFileSync('/etc/resolv.conf', 'utf8')
      } catch {
        return ''
      }
    })()
    const targets = [...own, ...[...conf.matchAll(resolvers)].map((m) => m[1]!)]
    const script = String.raw`
import json, socket, sys
port, targets = int(sys.argv[1]), json.loads(sys.argv[2])
out = []
for a in targets:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for p in (port, 53):
        try:
            u.sendto(b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04leak\x07example\x03com\x00\x00\x01\x00\x01', (a, p))
            out.append('%s:%d sent' % (a, p))
        except OSError as e:
            out.append('%s:%d %d' % (a, p, e.errno))
try:
    socket.getaddrinfo('leak.example.com', 80)
    out.append('resolved')
except OSError:
    out.append('unresolved')
print(json.dumps(out))
`
    const r = await run(['python3', '-c', script, String(udpPort), JSON.stringify(targets)], {
      network: { allow: ['example.com'] },
    })
    assert.equal(r.status, 'ok', r.stderr)
    const out = JSON.parse(r.stdout) as string[]
    assert.equal(out.at(-1), 'unresolved')
    // The sandbox's own loopback takes a datagram; every other address is unreachable from its namespace.
    for (const line of out.slice(0, -1)) assert.match(line, /^127\.0\.0\.1:\d+ sent$| 101$/, line)
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.equal(datagrams, 0, "a datagram reached the host's socket")
    assert.deepEqual(r.network, [])
  })
})
