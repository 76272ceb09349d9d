// DNS rebinding: a page of evil.example whose name re-resolves to 127.0.0.1 reaches `cordon serve` with
// `Host: evil.example`. The built `cordon serve` answers such a request 403 on every path, before any
// route, while IP literals, localhost, *.localhost and the operator's --allowed-host names pass.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { type Served, startServe, tempDir } from '../helpers.js'

const CLI = new URL('../../dist/cli/bin.cjs', import.meta.url).pathname
const skip = !existsSync(CLI) && 'needs npm run build'

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** One request to the server's own address, with whatever Host header it is given. */
function send(
  url: string,
  host: string,
  reqPath: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port: Number(port),
        path: reqPath,
        method: init.method ?? 'GET',
        headers: { ...init.headers, host },
      },
      (res) => {
        // An event stream does not end: its status and first bytes are enough.
        const stream = String(res.headers['content-type']).startsWith('text/event-stream')
        let body = ''
        res.setEncoding('utf8').on('data', (s: string) => {
          body += s
          if (stream) {
            res.destroy()
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body })
          }
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      },
    )
    req.on('error', reject)
    req.end(init.body)
  })
}

const refused = (a: Answer, host: string) => {
  assert.equal(a.status, 403, a.body)
  const body = JSON.parse(a.body) as { error: { code: string; message: string } }
  assert.equal(body.error.code, 'forbidden')
  assert.ok(body.error.message.includes(host), body.error.message)
  assert.match(body.error.message, /--allowed-host/)
}

const MCP_INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
})
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }

describe('cordon serve against DNS rebinding', { skip }, () => {
  let served: Served
  let auth: Record<string, string>
  let port: string
  before(async () => {
    served = await startServe(path.join(tempDir('cordon-hosts-'), 'data'))
    auth = { authorization: `Bearer ${served.adminKey}` }
    port = new URL(served.url).port
  })
  after(async () => {
    served?.child.kill('SIGTERM')
    await served?.exited
  })

  it('refuses Host: evil.example on every path, a valid key or not', async () => {
    for (const host of [
      'evil.example',
      `evil.example:${port}`,
      `Evil.Example.:${port}`,
      'localhost.evil.example',
    ]) {
      refused(await send(served.url, host, '/v1/runs', { headers: auth }), host)
      refused(await send(served.url, host, '/v1/runs'), host)
      refused(
        await send(served.url, host, '/v1/runs', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ cmd: ['true'] }),
        }),
        host,
      )
      refused(
        await send(served.url, host, '/mcp', {
          method: 'POST',
          headers: { ...auth, ...MCP_HEADERS },
          body: MCP_INIT,
        }),
        host,
      )
      for (const p of [
        '/ui',
        '/ui/login',
        '/ui/app.js',
        '/healthz',
        '/readyz',
        '/metrics',
        '/openapi.json',
        '/nope',
      ])
        refused(await send(served.url, host, p, { headers: auth }), host)
      refused(
        await send(served.url, host, '/ui/session', {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: `http://${host}` },
          body: JSON.stringify({ key: served.adminKey }),
        }),
        host,
      )
    }
  })

  it('refuses an event stream to another Host, which the server’s own address opens', async () => {
    const made = await send(served.url, `127.0.0.1:${port}`, '/v1/runs', {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ cmd: ['true'], wait: '20s' }),
    })
    // A run the machine cannot make still has an event stream.
    assert.equal(made.status, 201, made.body)
    const id = (JSON.parse(made.body) as { id: string }).id
    const open = await send(served.url, `127.0.0.1:${port}`, `/v1/runs/${id}/events`, { headers: auth })
    assert.equal(open.status, 200, open.body)
    assert.match(String(open.headers['content-type']), /^text\/event-stream/)
    refused(
      await send(served.url, 'evil.example', `/v1/runs/${id}/events`, { headers: auth }),
      'evil.example',
    )
  })

  it('serves IP literals, localhost and *.localhost, on any port', async () => {
    for (const host of [
      `127.0.0.1:${port}`,
      '127.0.0.1',
      `localhost:${port}`,
      'LOCALHOST.',
      `app.localhost:${port}`,
      `[::1]:${port}`,
      '[::1]',
      '192.168.1.10:8080',
    ]) {
      const health = await send(served.url, host, '/healthz')
      assert.equal(health.status, 200, `${host}: ${health.body}`)
      const runs = await send(served.url, host, '/v1/runs', { headers: auth })
      assert.equal(runs.status, 200, `${host}: ${runs.body}`)
    }
    const ui = await send(served.url, `localhost:${port}`, '/ui/login')
    assert.equal(ui.status, 200)
    const mcp = await send(served.url, `[::1]:${port}`, '/mcp', {
      method: 'POST',
      headers: { ...auth, ...MCP_HEADERS },
      body: MCP_INIT,
    })
    assert.equal(mcp.status, 200, mcp.body)
  })

  it('judges every Host a request names: two Host headers, an absolute-form target', async () => {
    const { hostname } = new URL(served.url)
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        let data = ''
        const socket = connect(Number(port), hostname, () => socket.write(text))
        socket.setEncoding('utf8').on('data', (s: string) => {
          data += s
        })
        socket.on('end', () => resolve(data)).on('error', reject)
      })
    const key = `Authorization: Bearer ${served.adminKey}\r\n`
    for (const request of [
      // Node keeps the first Host; hono joined both ("evil.example, x.localhost"), which ended in .localhost.
      `GET /v1/runs HTTP/1.1\r\nHost: evil.example\r\nHost: x.localhost\r\n${key}Connection: close\r\n\r\n`,
      `GET /v1/runs HTTP/1.1\r\nHost: evil.example, x.localhost\r\n${key}Connection: close\r\n\r\n`,
      // The request is for the target's authority (RFC 9112 3.2.2), and the app's URL is built from it.
      `GET http://evil.example/v1/runs HTTP/1.1\r\nHost: localhost\r\n${key}Connection: close\r\n\r\n`,
      `GET http://evil.example:${port}/v1/runs HTTP/1.0\r\n${key}\r\n`,
    ]) {
      const answer = await raw(request)
      assert.match(answer, /^HTTP\/1\.[01] (400|403) /, `${JSON.stringify(request)}: ${answer.slice(0, 200)}`)
    }
    const ok = await raw(
      `GET http://localhost:${port}/healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
    )
    assert.match(ok, /^HTTP\/1\.1 200 /)
  })

  it('serves a request without a Host header (HTTP/1.0)', async () => {
    const { hostname } = new URL(served.url)
    const answer = await new Promise<string>((resolve, reject) => {
      let data = ''
      const socket = connect(Number(port), hostname, () => socket.write('GET /healthz HTTP/1.0\r\n\r\n'))
      socket.setEncoding('utf8').on('data', (s: string) => {
        data += s
      })
      socket.on('end', () => resolve(data)).on('error', reject)
    })
    assert.match(answer, /^HTTP\/1\.[01] 200 /)
  })
})

describe('cordon serve --allowed-host', { skip }, () => {
  const servers: Served[] = []
  after(async () => {
    for (const s of servers) s.child.kill('SIGTERM')
    await Promise.all(servers.map((s) => s.exited))
  })

  it('serves the listed names, and the subdomains of a .name, and no other', async () => {
    const served = await startServe(path.join(tempDir('cordon-hosts-'), 'data'), [
      '--allowed-host',
      'Cordon.Example.',
      '--allowed-host',
      '.corp.example',
    ])
    servers.push(served)
    const auth = { authorization: `Bearer ${served.adminKey}` }
    for (const host of [
      'cordon.example',
      'CORDON.example:443',
      'corp.example',
      'a.b.corp.example:7070',
      'localhost',
    ]) {
      const runs = await send(served.url, host, '/v1/runs', { headers: auth })
      assert.equal(runs.status, 200, `${host}: ${runs.body}`)
      const mcp = await send(served.url, host, '/mcp', {
        method: 'POST',
        headers: { ...auth, ...MCP_HEADERS },
        body: MCP_INIT,
      })
      assert.equal(mcp.status, 200, `${host}: ${mcp.body}`)
    }
    for (const host of ['x.cordon.example', 'evilcorp.example', 'evil.example'])
      refused(await send(served.url, host, '/v1/runs', { headers: auth }), host)
  })

  it('serves every Host with --allowed-host any', async () => {
    const served = await startServe(path.join(tempDir('cordon-hosts-'), 'data'), ['--allowed-host', 'any'])
    servers.push(served)
    const answer = await send(served.url, 'evil.example', '/healthz')
    assert.equal(answer.status, 200, answer.body)
  })

  it('refuses a wildcard entry at start, naming the flag and the form it takes', async () => {
    await assert.rejects(
      startServe(path.join(tempDir('cordon-hosts-'), 'data'), ['--allowed-host', '*.corp.example']),
      /--allowed-host.*\.corp\.example/s,
    )
  })
})
