// `/mcp` on a real `cordon serve` (the built bin, on loopback), through the SDK's Streamable HTTP client
// with a bearer key: the same keys and ceilings as /v1, runs through the service's queue.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { noNamespace, type Served, startServe, tempDir } from '../helpers.js'

const CLI = new URL('../../dist/cli/bin.cjs', import.meta.url).pathname
const skip = noNamespace || (!existsSync(CLI) && 'needs npm run build')

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('')
const structured = (r: CallToolResult) => r.structuredContent as Record<string, unknown>

describe('/mcp on cordon serve', { skip }, () => {
  let served: Served
  const clients: Client[] = []
  before(async () => {
    served = await startServe(path.join(tempDir('cordon-mcp-http-'), 'data'))
  })
  after(async () => {
    for (const c of clients) await c.close().catch(() => undefined)
    served?.child.kill('SIGTERM')
    await served?.exited
  })

  const newKey = async (body: Record<string, unknown>): Promise<string> => {
    const res = await fetch(`${served.url}/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${served.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'mcp', ...body }),
    })
    assert.equal(res.status, 201, await res.clone().text())
    return ((await res.json()) as { key: string }).key
  }
  const connect = async (key: string | null) => {
    const transport = new StreamableHTTPClientTransport(new URL(`${served.url}/mcp`), {
      requestInit: key ? { headers: { authorization: `Bearer ${key}` } } : {},
    })
    const client = new Client({ name: 'test', version: '1' })
    await client.connect(transport)
    clients.push(client)
    const call = async (name: string, args: Record<string, unknown>) =>
      (await client.callTool({ name, arguments: args })) as CallToolResult
    return { client, call }
  }

  it('runs a command as the caller’s key, within its ceilings', async () => {
    const key = await newKey({
      scopes: ['runs:write', 'runs:read'],
      ceilings: { limits: { wallTimeMs: '10s' }, network: 'none' },
    })
    const { client, call } = await connect(key)
    const { tools } = await client.listTools()
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      'cancel_run',
      'list_runs',
      'read_output',
      'run',
      'write_stdin',
    ])
    // The package's version (not 0.0.0), and this key's and server's limits in the run tool's text.
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    assert.equal(client.getServerVersion()?.version, pkg.version)
    const said = String(tools.find((t) => t.name === 'run')?.description)
    assert.match(said, /wallTimeMs: default 10s, at most 10s/)
    assert.match(said, /maxOutputBytes: default 1M, at most 16M/)
    assert.match(said, /nothing persists between calls/)
    const r = await call('run', { cmd: ['sh', '-c', 'echo over http'] })
    assert.equal((structured(r).result as { stdout: string }).stdout, 'over http\n')
    const id = String(structured(r).run_id)
    // The same run through /v1, with the same key.
    const v1 = await fetch(`${served.url}/v1/runs/${id}`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(((await v1.json()) as { state: string }).state, 'finished')

    const over = await call('run', { cmd: ['true'], limits: { wallTimeMs: '1m' } })
    assert.equal(over.isError, true)
    assert.match(text(over), /over-ceiling: options\.limits\.wallTimeMs/)

    // A run past wait_ms, followed with read_output; progress comes over the response's event stream.
    const seen: string[] = []
    const slow = (await client.callTool(
      { name: 'run', arguments: { shell: 'echo one; sleep 0.6; echo two; sleep 2', wait_ms: 1500 } },
      undefined,
      { onprogress: (p) => void seen.push(String(p.message)) },
    )) as CallToolResult
    assert.equal(structured(slow).state, 'running')
    assert.ok(seen.includes('two') || seen.includes('one'), JSON.stringify(seen))
    const page = structured(await call('read_output', { run_id: structured(slow).run_id, wait_ms: 5000 }))
    assert.equal(page.data, 'one\ntwo\n')
    const canceled = await call('cancel_run', { run_id: structured(slow).run_id })
    assert.equal((structured(canceled).result as { status: string }).status, 'canceled')
  })

  it('a key without runs:write cannot run; no key or an unknown one gets 401', async () => {
    const reader = await newKey({ scopes: ['runs:read'] })
    const { call } = await connect(reader)
    const r = await call('run', { cmd: ['true'] })
    assert.equal(r.isError, true)
    assert.match(text(r), /forbidden: this key lacks the runs:write scope/)

    await assert.rejects(connect(null), /401|Unauthorized|needs Authorization/i)
    await assert.rejects(connect('cordon_nope'), /401|Unauthorized|unknown or revoked key/i)
    const res = await fetch(`${served.url}/mcp`, { method: 'POST', body: '{}' })
    assert.equal(res.status, 401)
    assert.equal(res.headers.get('www-authenticate'), 'Bearer')
  })

  it('bounds a body as /v1 does (413 past 8 MiB)', async () => {
    const res = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${served.adminKey}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: 'x'.repeat(8 * 1024 * 1024 + 1),
    })
    assert.equal(res.status, 413)
  })

  it('refuses a body that is not UTF-8 (400, JSON-RPC’s parse error naming the body)', async () => {
    const body = Buffer.concat([
      Buffer.from(
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run","arguments":{"cmd":["echo","',
      ),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"]}}}'),
    ])
    const res = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${served.adminKey}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
      },
      body: new Uint8Array(body),
    })
    assert.equal(res.status, 400)
    const error = ((await res.json()) as { error: { code: number; message: string } }).error
    assert.equal(error.code, -32700)
    assert.match(error.message, /body: is not valid UTF-8/)
  })

  it('bounds what a batch of calls holds: 100 read_output calls of 1 MiB each', async () => {
    // One 14 KB batch of 100 read_output calls (1 MiB of \x01 each, 6 bytes of JSON a byte, twice) took
    // the server from 141 to 1 513 MiB of RSS: every result was held until the client read them all.
    const headers = {
      authorization: `Bearer ${served.adminKey}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    }
    const made = await fetch(`${served.url}/v1/runs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        cmd: ['sh', '-c', 'head -c 1048576 /dev/zero | tr "\\0" "\\1"'],
        options: { limits: { maxOutputBytes: '2M' } },
        wait: '30s',
      }),
    })
    const run = (await made.json()) as { id: string; result: { outputBytes: number } }
    assert.equal(run.result.outputBytes, 1048576)
    const pid = served.child.pid as number
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024
    const before = rss()
    let peak = before
    const sampler = setInterval(() => {
      peak = Math.max(peak, rss())
    }, 20)
    const batch = Array.from({ length: 100 }, (_, i) => ({
      jsonrpc: '2.0',
      id: i + 1,
      method: 'tools/call',
      params: { name: 'read_output', arguments: { run_id: run.id, limit: 1048576 } },
    }))
    let bytes = 0
    try {
      const res = await fetch(`${served.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify(batch),
      })
      assert.equal(res.status, 200)
      const reader = (res.body as ReadableStream<Uint8Array>).getReader()
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        bytes += value.length
      }
    } finally {
      clearInterval(sampler)
    }
    const mib = (n: number) => `${(n / 1048576).toFixed(0)} MiB`
    // Past the key's share of the answer budget (64 MiB), calls are told to retry, not held.
    assert.ok(bytes < 128 * 1048576, `the answer was ${mib(bytes)}`)
    assert.ok(peak - before < 512 * 1048576, `RSS ${mib(before)} → ${mib(peak)}`)
    process.stderr.write(`# /mcp batch: answer ${mib(bytes)}, RSS ${mib(before)} → peak ${mib(peak)}\n`)
    // And the budget is given back: a call after it is answered.
    const again = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { ...headers, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'read_output', arguments: { run_id: run.id, limit: 1048576 } },
      }),
    })
    const answer = await again.text()
    assert.doesNotMatch(answer, /busy: /)
    assert.match(answer, /next_offset/)
  })

  it('holds no standalone event stream and no session: GET and DELETE are 405', async () => {
    const headers = { authorization: `Bearer ${served.adminKey}`, accept: 'text/event-stream' }
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${served.url}/mcp`, { method, headers, signal: AbortSignal.timeout(5000) })
      assert.equal(res.status, 405, method)
      assert.equal(res.headers.get('allow'), 'POST')
    }
  })

  it('refuses a request from a page of another origin (403), as the spec asks', async () => {
    const init = (origin?: string) => ({
      method: 'POST',
      headers: {
        authorization: `Bearer ${served.adminKey}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(origin ? { origin } : {}),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    })
    for (const origin of ['http://evil.example', 'null', `${served.url}.evil.example`]) {
      const res = await fetch(`${served.url}/mcp`, init(origin))
      assert.equal(res.status, 403, origin)
      assert.equal(((await res.json()) as { jsonrpc: string }).jsonrpc, '2.0')
    }
    for (const origin of [served.url, undefined]) {
      const res = await fetch(`${served.url}/mcp`, init(origin))
      assert.equal(res.status, 200, String(origin))
      await res.body?.cancel()
    }
  })
})
