// The `eventsource` npm client (what a browser's EventSource does, in Node) against a real `cordon serve`:
// it reads a run's events to `end`, and after a connection dropped mid-output it resumes with
// Last-Event-ID, every event once and every byte once. The key goes in a custom fetch's header.
import assert from 'node:assert/strict'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { EventSource, type FetchLike } from 'eventsource'
import { type Served, startServe, tempDir } from '../helpers.js'

const withKey =
  (key: string): FetchLike =>
  (url, init) =>
    fetch(url, { ...init, headers: { ...init?.headers, Authorization: `Bearer ${key}` } })

interface Got {
  id: string
  type: string
  data: Record<string, unknown>
}

/** Every event of `url` until `end` (then closed, or EventSource would reconnect), in arrival order. */
function readToEnd(url: string, key: string, fetchImpl = withKey(key)): Promise<Got[]> {
  return new Promise((resolve, reject) => {
    const source = new EventSource(url, { fetch: fetchImpl })
    const got: Got[] = []
    const timer = setTimeout(() => {
      source.close()
      reject(new Error(`no end in 60 s: ${JSON.stringify(got.map((g) => g.type))}`))
    }, 60_000)
    for (const type of ['queued', 'started', 'output', 'log', 'network', 'end', 'interrupted']) {
      source.addEventListener(type, (event) => {
        got.push({ id: event.lastEventId, type, data: JSON.parse(event.data) as Record<string, unknown> })
        if (type === 'end' || type === 'interrupted') {
          clearTimeout(timer)
          source.close()
          resolve(got)
        }
      })
    }
    source.addEventListener('error', (event) => {
      // A failed connection (a 4xx) is final: EventSource stops, and so does the test.
      if (source.readyState === source.CLOSED) {
        clearTimeout(timer)
        reject(new Error(`EventSource failed: ${event.message ?? ''} (${event.code ?? ''})`))
      }
    })
  })
}

const submit = async (s: Served, key: string, script: string) => {
  const res = await fetch(`${s.url}/v1/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: JSON.stringify({ cmd: ['sh', '-c', script] }),
  })
  assert.equal(res.status, 201)
  return ((await res.json()) as { id: string }).id
}

const outputText = (events: Got[]) =>
  events
    .filter((e) => e.type === 'output')
    .map((e) => e.data.data)
    .join('')

const LINES = Array.from({ length: 12 }, (_, i) => `line${i + 1}\n`).join('')
const SCRIPT = 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line$i; sleep 0.15; done'

describe('the eventsource npm client', { timeout: 120_000 }, () => {
  it("reads a run's events to end, each once and in order", async () => {
    const s = await startServe(tempDir('cordon-es-'))
    const key = s.adminKey as string
    const id = await submit(s, key, SCRIPT)
    const events = await readToEnd(`${s.url}/v1/runs/${id}/events`, key)
    assert.deepEqual(
      events.map((e) => Number(e.id)),
      events.map((_, i) => i + 1),
    )
    assert.equal(events[0]?.type, 'queued')
    assert.equal(events.at(-1)?.type, 'end')
    assert.equal(outputText(events), LINES)
    assert.equal((events.at(-1)?.data.result as { status: string } | undefined)?.status, 'ok')
    s.child.kill('SIGTERM')
    assert.equal(await s.exited, 0)
  })

  it('resumes with Last-Event-ID after the connection drops mid-output: every byte once', async () => {
    const s = await startServe(tempDir('cordon-es-'))
    const key = s.adminKey as string
    const upstream = new URL(s.url)
    // A TCP proxy that cuts the first connection (both ways) once the server has sent line3 through it,
    // and records the request head of each connection.
    const heads: string[] = []
    let connections = 0
    const proxy: Server = createServer((client: Socket) => {
      const n = connections++
      let head = ''
      let seen = ''
      const server = connect(Number(upstream.port), upstream.hostname)
      client.on('data', (b: Buffer) => {
        if (!head.includes('\r\n\r\n')) head += b.toString('latin1')
        if (head.includes('\r\n\r\n') && heads[n] === undefined) heads[n] = head
        server.write(b)
      })
      server.on('data', (b: Buffer) => {
        client.write(b)
        seen += b.toString('latin1')
        if (n === 0 && seen.includes('line3')) {
          server.destroy()
          client.destroy()
        }
      })
      server.on('close', () => client.destroy())
      client.on('close', () => server.destroy())
      server.on('error', () => {})
      client.on('error', () => {})
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    const port = (proxy.address() as { port: number }).port
    try {
      const id = await submit(s, key, SCRIPT)
      const events = await readToEnd(`http://127.0.0.1:${port}/v1/runs/${id}/events`, key)
      assert.ok(connections >= 2, `the client reconnected (${connections} connections)`)
      const resumedFrom = /^last-event-id: *(\d+)\r$/im.exec(heads[1] ?? '')?.[1]
      assert.ok(resumedFrom, `the second request carries Last-Event-ID: ${heads[1]}`)
      assert.ok(Number(resumedFrom) >= 3, `after the output it had (${resumedFrom})`)
      assert.ok(Number(resumedFrom) < events.length - 1, `mid-output, not after it (${resumedFrom})`)
      assert.deepEqual(
        events.map((e) => Number(e.id)),
        events.map((_, i) => i + 1),
        'each event once, in order, none lost at the cut',
      )
      assert.equal(outputText(events), LINES, 'every byte once')
      assert.equal(events.at(-1)?.type, 'end')
    } finally {
      proxy.close()
      s.child.kill('SIGTERM')
      assert.equal(await s.exited, 0)
    }
  })
})
