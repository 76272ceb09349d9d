// The typed client against the real service over loopback HTTP (createService + createApp, as `cordon
// serve` builds them), a TCP proxy in between where a test drops the connection mid-run.
import assert from 'node:assert/strict'
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { serve as listen } from '@hono/node-server'
import { parseSse } from '../../src/client/client.js'
import { ClientError, type ClientEvent, connect, type RequestOptions } from '../../src/client/index.js'
import { run } from '../../src/index.js'
import { createApp } from '../../src/service/http/app.js'
import { createService } from '../../src/service/service.js'
import { tempDir } from '../helpers.js'

/** A TCP proxy to `port` whose open connections `drop()` cuts (it keeps listening). */
async function proxy(
  port: number,
): Promise<{ url: string; drop(): void; connections(): number; close(): void }> {
  const sockets = new Set<Socket>()
  let count = 0
  const server: Server = createServer((client) => {
    count++
    const upstream = tcpConnect(port, '127.0.0.1')
    for (const [s, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(s)
      s.on('close', () => {
        sockets.delete(s)
        other.destroy()
      })
      s.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${address.port}`,
    drop: () => {
      for (const s of sockets) s.destroy()
    },
    connections: () => count,
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    },
  }
}

const bytes = (text: string) => new TextEncoder().encode(text)

/** An SSE body delivered in the given pieces. */
const streamOf = (...pieces: string[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of pieces) c.enqueue(bytes(p))
      c.close()
    },
  })

describe('client', { timeout: 120_000 }, () => {
  let created: Awaited<ReturnType<typeof createService>>
  let server: ReturnType<typeof listen>
  let url: string
  let admin: string

  before(async () => {
    created = await createService({ dataDir: tempDir('cordon-client-'), concurrency: 2, maxQueued: 20 })
    const { app } = createApp(created.service, { heartbeatMs: 200 })
    server = await new Promise((resolve) => {
      const s = listen({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
    })
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
    admin = created.adminKey as string
  })
  after(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve())
      if ('closeAllConnections' in server) server.closeAllConnections()
    })
    await created.service.close()
  })

  it('run() says what the library says for the same command', async () => {
    const client = connect({ url, key: admin })
    const cmd = ['sh', '-c', 'echo out; echo err >&2; exit 3']
    const remote = await client.run(cmd)
    const local = await run(cmd)
    for (const field of ['status', 'exitCode', 'signal', 'stdout', 'stderr', 'truncated'] as const)
      assert.deepEqual(remote[field], local[field], field)
    assert.equal(remote.status, 'nonzero-exit')
    assert.equal(remote.stdout, 'out\n')
  })

  it('run(): a limit is the same verdict', async () => {
    const client = connect({ url, key: admin })
    const remote = await client.run(['sleep', '5'], { options: { limits: { wallTimeMs: '300ms' } } })
    assert.equal(remote.status, 'timeout')
    assert.equal(remote.violation?.kind, 'timeout')
    assert.equal(remote.violation?.limit, 300)
  })

  it('typed options go through; the result is text; the end event carries the typed result', async () => {
    const client = connect({ url, key: admin })
    // Options as the library types them (units as strings, the CLI's allowlist form): no cast.
    const options: RequestOptions = {
      limits: { wallTimeMs: '20s', maxOutputBytes: '64K' },
      network: 'none',
      env: { GREETING: 'héllo' },
      redact: ['s3cret'],
    }
    const result = await client.run(['sh', '-c', 'echo "$GREETING s3cret"; echo e >&2'], { options })
    assert.equal(result.status, 'ok')
    // stdout is typed string, and is one: string methods need no cast.
    assert.equal(typeof result.stdout, 'string')
    assert.equal(result.stdout.trimEnd(), 'héllo [REDACTED]')
    assert.equal(result.stderr.trimEnd(), 'e')

    const { id } = await client.submit({ cmd: ['sh', '-c', 'echo x; exit 4'], options })
    let end: ClientEvent<'end'> | undefined
    let started: ClientEvent<'started'> | undefined
    const text: string[] = []
    for await (const event of client.events(id)) {
      // Narrowed by its type: no cast of data.
      if (event.type === 'end') end = event
      else if (event.type === 'started') started = event
      else if (event.type === 'output') text.push(event.data.data)
    }
    assert.equal(text.join(''), 'x\n')
    assert.equal(typeof started?.data.pid, 'number')
    assert.equal(end?.data.result.status, 'nonzero-exit')
    assert.equal(end?.data.result.exitCode, 4)
    assert.equal(typeof end?.data.result.wallMs, 'number')
  })

  it('submit, get, list, output, cancel and remove', async () => {
    const client = connect({ url, key: admin })
    const done = await client.submit({ cmd: ['echo', 'kept'], metadata: { suite: 'client-1' }, wait: '30s' })
    assert.equal(done.state, 'finished')
    assert.deepEqual(await client.get(done.id), done)
    assert.equal(new TextDecoder().decode(await client.output(done.id, 'stdout')), 'kept\n')
    assert.equal(new TextDecoder().decode(await client.output(done.id, 'stdout', { offset: 2 })), 'pt\n')
    const page = await client.list({ metadata: { suite: 'client-1' }, state: 'finished' })
    assert.deepEqual(
      page.runs.map((r) => r.id),
      [done.id],
    )
    const long = await client.submit({ cmd: ['sleep', '30'] })
    await client.cancel(long.id)
    const canceled = await client.get(long.id, { wait: '20s' })
    assert.equal(canceled.result?.status, 'canceled')
    await client.remove(long.id)
    await assert.rejects(client.get(long.id), (e: ClientError) => e.status === 404 && e.code === 'not-found')
  })

  it("output() and base64 events() give a binary program's bytes exactly", async () => {
    const client = connect({ url, key: admin })
    const data = Buffer.from([0, 0xff, 0xfe, 0xc3, 0x28, 0x80, 0x41, 0xe2, 0x82])
    const done = await client.submit({
      cmd: ['cat', 'b.bin'],
      files: [{ path: 'b.bin', content: data.toString('base64'), encoding: 'base64' }],
      wait: '30s',
    })
    assert.equal(done.result?.status, 'ok')
    assert.deepEqual([...(await client.output(done.id, 'stdout'))], [...data])
    assert.deepEqual(
      [...(await client.output(done.id, 'output', { offset: 1, limit: 3 }))],
      [0xff, 0xfe, 0xc3],
    )
    const parts: Buffer[] = []
    for await (const event of client.events(done.id, { encoding: 'base64' })) {
      if (event.type === 'output') parts.push(Buffer.from(String(event.data.data), 'base64'))
    }
    assert.deepEqual([...Buffer.concat(parts)], [...data])
    assert.equal(done.result?.stdout, data.toString('utf8'), 'the result: the bytes as text')
  })

  it('events() resumes a dropped connection: every event once, in order', async () => {
    const relay = await proxy(Number(new URL(url).port))
    try {
      const client = connect({ url: relay.url, key: admin })
      const { id } = await client.submit({
        cmd: ['sh', '-c', 'for i in 1 2 3 4 5 6; do echo $i; sleep 0.2; done'],
      })
      const events: ClientEvent[] = []
      let dropped = 0
      for await (const event of client.events(id, { backoffMs: 50 })) {
        events.push(event)
        // Twice, mid-run: after the first and the third line of output.
        const outputs = events.filter((e) => e.type === 'output').length
        if (event.type === 'output' && (outputs === 1 || outputs === 3) && dropped < outputs) {
          dropped = outputs
          relay.drop()
        }
      }
      assert.ok(relay.connections() >= 3, `reconnected: ${relay.connections()} connections`)
      assert.deepEqual(
        events.map((e) => e.seq),
        events.map((_, i) => i + 1),
        'every event once, in order, from the first',
      )
      assert.equal(events.at(-1)?.type, 'end')
      const out = events
        .filter((e): e is ClientEvent<'output'> => e.type === 'output' && e.data.stream === 'stdout')
        .map((e) => e.data.data)
      assert.equal(out.join(''), '1\n2\n3\n4\n5\n6\n')
      const end = events.at(-1)
      assert.equal(end?.type === 'end' && end.data.result.status, 'ok')
      // And from a given event on, once it finished: replayed from the store.
      const later: number[] = []
      for await (const e of client.events(id, { after: 3 })) later.push(e.seq)
      assert.deepEqual(
        later,
        events.slice(3).map((e) => e.seq),
      )
    } finally {
      relay.close()
    }
  })

  it('events() gives up after its retries with a ClientError', async () => {
    const client = connect({ url, key: admin })
    const { id } = await client.submit({ cmd: ['true'], wait: '20s' })
    const dead = await proxy(1) // forwards to a port nobody listens on: every connection drops
    try {
      const gone = connect({ url: dead.url, key: admin })
      await assert.rejects(
        (async () => {
          for await (const _ of gone.events(id, { retries: 2, backoffMs: 10 })) {
            // none
          }
        })(),
        (e: unknown) => e instanceof ClientError && e.status === 0 && /dropped 3 times/.test(e.message),
      )
      assert.equal(dead.connections(), 3)
    } finally {
      dead.close()
    }
  })

  it('a refusal is a ClientError with the status, code, message and field', async () => {
    const client = connect({ url, key: admin })
    await assert.rejects(
      // Not a client's option (the type says so too): what the server answers a client that sends it.
      client.submit({ cmd: ['true'], options: { writable: ['/tmp'] } as RequestOptions }),
      (e: unknown) =>
        e instanceof ClientError &&
        e.status === 403 &&
        e.code === 'forbidden-option' &&
        e.field === 'options.writable' &&
        e.message === 'options.writable is set by the server only',
    )
    await assert.rejects(
      client.submit({ cmd: [] }),
      (e: unknown) =>
        e instanceof ClientError && e.status === 400 && e.code === 'invalid' && e.field === 'cmd',
    )
    await assert.rejects(
      connect({ url, key: 'cordon_nope' }).list(),
      (e: unknown) => e instanceof ClientError && e.status === 401 && e.code === 'unauthorized',
    )
    // A refused event stream is not retried.
    await assert.rejects(
      (async () => {
        for await (const _ of client.events('nope')) {
          // none
        }
      })(),
      (e: unknown) => e instanceof ClientError && e.status === 404,
    )
  })

  it('Retry-After becomes retryAfterS; an answer that is not the API’s still has its status', async () => {
    const answer = (res: Response) => connect({ url: 'http://x', key: 'k', fetch: async () => res })
    await assert.rejects(
      answer(
        new Response(JSON.stringify({ error: { code: 'queue-full', message: 'the queue is full' } }), {
          status: 503,
          headers: { 'retry-after': '7' },
        }),
      ).submit({ cmd: ['true'] }),
      (e: unknown) =>
        e instanceof ClientError && e.status === 503 && e.code === 'queue-full' && e.retryAfterS === 7,
    )
    await assert.rejects(
      answer(new Response('<html>bad gateway</html>', { status: 502 })).get('x'),
      (e: unknown) => e instanceof ClientError && e.status === 502 && e.code === 'http-502',
    )
  })
})

describe('client run() without a server', () => {
  it('long-polls GET ?wait= until the run finished', async () => {
    const asked: string[] = []
    const view = (state: string, result?: unknown) =>
      new Response(JSON.stringify({ id: 'r1', state, ...(result ? { result } : {}) }), { status: 200 })
    const client = connect({
      url: 'http://x/',
      key: 'k',
      fetch: async (input, init) => {
        asked.push(`${init?.method ?? 'GET'} ${String(input)} ${init?.body ?? ''}`)
        if (asked.length === 1) return view('queued')
        if (asked.length === 2) return view('running')
        return view('finished', { status: 'ok', stdout: 'x' })
      },
    })
    const result = await client.run(['echo'], { metadata: { a: 'b' } })
    assert.equal(result.stdout, 'x')
    assert.deepEqual(asked, [
      'POST http://x/v1/runs {"metadata":{"a":"b"},"cmd":["echo"],"wait":"60s"}',
      'GET http://x/v1/runs/r1?wait=60s ',
      'GET http://x/v1/runs/r1?wait=60s ',
    ])
  })
})

describe('parseSse', () => {
  const all = async (body: ReadableStream<Uint8Array>) => {
    const out = []
    for await (const m of parseSse(body)) out.push(m)
    return out
  }

  it('joins multi-line data, skips comments, keeps id and event, across any split', async () => {
    const text =
      ': stream\n\nid: 1\nevent: output\ndata: a\ndata:b\n\n: heartbeat\n\nid: 2\r\ndata: c\r\n\r\n'
    const expected = [
      { id: '1', event: 'output', data: 'a\nb' },
      { id: '2', event: 'message', data: 'c' },
    ]
    assert.deepEqual(await all(streamOf(text)), expected)
    // Split at every byte, a CRLF's halves included.
    assert.deepEqual(await all(streamOf(...text.split(''))), expected)
  })

  it('drops an unfinished block at the end of the stream', async () => {
    assert.deepEqual(await all(streamOf('id: 1\ndata: x\n\nid: 2\ndata: y\n')), [
      { id: '1', event: 'message', data: 'x' },
    ])
  })
})
