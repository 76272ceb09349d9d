// The network allowlist for real: servers this test starts on loopback, reached only through cordon's proxies.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { run, start } from '../../src/index.js'
import { noLauncher, noNamespace, notRoot, waitFor } from '../helpers.js'

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
      { host: 'localhost', port, allowed: true, reason: 'connected to 127.0.0.1' },
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
        ['localhost', false, 'IP is a loopback address (allowLoopback is off)'],
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
      const mode = statSync(dir).mode & 0o777
      assert.equal(mode, 0o700, `proxy directory mode ${mode.toString(8)}`)
      const probe =
        'import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n  s.connect(sys.argv[1]); print("connected")\nexcept OSError as e:\n  print("refused", e.errno)'
      const other = await run(['python3', '-c', probe, path.join(dir, 'http.sock')], { isolation: 'process' })
      assert.match(other.stdout, /^refused/, other.stderr)
    } finally {
      owner.kill()
      await owner.result
    }
  })

  it('the process tier refuses an allowlist rather than run without it', async () => {
    const r = await run(['true'], { isolation: 'process', network: { allow: ['localhost'] } })
    assert.equal(r.status, 'error')
    assert.equal(r.violation?.limit, 'network')
  })
})
