// The HTTP layer against clients that hold on: a client that never reads its event stream, many streams
// or long polls, a key revoked mid-stream, a malformed path. The real service, except where a stream's
// buffer must be watched (a service that counts what the stream took).
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { after, before, describe, it } from 'node:test'
import { serve as serveHttp } from '@hono/node-server'
import { parseSse } from '../../src/client/client.js'
import { errorResult } from '../../src/index.js'
import { createApp } from '../../src/service/http/app.js'
import { sseStream } from '../../src/service/http/sse.js'
import { createService } from '../../src/service/service.js'
import type { KeyRecord, RunEvent, Service } from '../../src/service/types.js'
import { tempDir } from '../helpers.js'

type Json = Record<string, unknown>
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A service with one run whose events are `stored`; counts the events a stream formatted. */
function countingService(stored: RunEvent[]) {
  const followers = new Set<(e: RunEvent) => void>()
  let taken = 0
  const counted = (e: RunEvent): RunEvent => ({
    ...e,
    get data() {
      taken++
      return e.data
    },
  })
  const service = {
    events(_key: KeyRecord, _id: string, afterSeq: number, follow: (e: RunEvent) => void) {
      const f = (e: RunEvent) => follow(counted(e))
      followers.add(f)
      return { past: stored.filter((e) => e.seq > afterSeq).map(counted), stop: () => followers.delete(f) }
    },
  } as unknown as Service
  const append = (type: RunEvent['type'], data: Record<string, unknown>) => {
    const e: RunEvent = { runId: 'run_x', seq: stored.length + 1, type, at: new Date().toISOString(), data }
    stored.push(e)
    for (const f of [...followers]) f(e)
  }
  return { service, append, taken: () => taken, following: () => followers.size }
}

describe('http limits', () => {
  it('holds a bounded amount for an event stream nobody reads, then sends every event once when read', async () => {
    const chunk = Buffer.alloc(6 * 1024, 'a').toString('base64') // 8 KiB an event
    const stored: RunEvent[] = []
    const fake = countingService(stored)
    for (let i = 0; i < 500; i++) fake.append('output', { stream: 'stdout', data: chunk })
    const body = sseStream(fake.service, {} as KeyRecord, 'run_x', 0, {
      encoding: 'base64',
      heartbeatMs: 60_000,
    })
    await sleep(20)
    for (let i = 0; i < 500; i++) fake.append('output', { stream: 'stdout', data: chunk })
    await sleep(20)
    // 1000 events (8 MiB) stored: a stream that nobody reads took a few of them, not all.
    assert.ok(fake.taken() < 100, `took ${fake.taken()} events before any read`)
    assert.equal(fake.following(), 0, 'stopped following a client that is behind')
    fake.append('end', { result: {} })
    const text = await new Response(body).text()
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))
    assert.deepEqual(
      ids,
      stored.map((e) => e.seq),
      'each event once, in order, the end last',
    )
  })

  describe('over the real service', () => {
    let created: Awaited<ReturnType<typeof createService>>
    let app: ReturnType<typeof createApp>['app']
    let admin: string

    before(async () => {
      created = await createService({
        dataDir: tempDir('cordon-http-limits-'),
        concurrency: 2,
        maxQueued: 20,
      })
      app = createApp(created.service, {
        heartbeatMs: 100,
        maxStreamsPerKey: 2,
        maxWaitsPerKey: 1,
      }).app
      admin = created.adminKey as string
    })
    after(async () => {
      await created.service.close()
    })

    const call = (path: string, init: RequestInit & { key?: string } = {}) => {
      const { key = admin, ...rest } = init
      const headers = new Headers(rest.headers)
      headers.set('authorization', `Bearer ${key}`)
      return app.request(path, { ...rest, headers })
    }
    /** A run made straight in the store as the admin key's; each test gives it its events or result. */
    const storedRun = (prefix: string) => {
      const store = created.service.store
      const key = created.service.authenticate(admin) as KeyRecord
      const id = `${prefix}${Date.now()}`
      store.createRun({ id, keyId: key.id, createdAt: new Date().toISOString(), metadata: {}, request: {} })
      return { store, id }
    }
    const submit = async (cmd: string[], key = admin) =>
      (
        (await (
          await call('/v1/runs', { method: 'POST', body: JSON.stringify({ cmd }), key })
        ).json()) as Json
      ).id as string

    // A long history is read a range or a page at a time: the store is asked for the rows a read needs,
    // not for every event the run has. Counted on the store itself (a wrapped method), not timed.
    it('reads a range of a long output, and replays a long history, a page at a time', async () => {
      const { store, id } = storedRun('run_long')
      store.startRun(id, new Date().toISOString())
      const n = 5000
      const size = 1024
      const all = Buffer.alloc(n * size)
      for (let i = 0; i < all.length; i++) all[i] = (i * 7 + (i >> 10)) & 0xff
      for (let i = 0; i < n; i++) {
        const bytes = all.subarray(i * size, (i + 1) * size)
        store.appendEvent(id, 'output', {
          stream: 'stdout',
          offset: i * size,
          bytes: size,
          data: bytes.toString('base64'),
        })
      }
      let rows = 0
      const events = store.events.bind(store)
      const slices = store.outputSlices.bind(store)
      store.events = (...args) => {
        const page = events(...args)
        rows += page.length
        return page
      }
      store.outputSlices = (...args) => {
        const read = slices(...args)
        rows += read.length
        return read
      }
      try {
        // While it runs, then once it finished: the same bytes, from the events holding them.
        for (const finish of [false, true]) {
          if (finish)
            store.finishRun(
              id,
              { ...errorResult('x', 'y'), status: 'ok', violation: null },
              new Date().toISOString(),
            )
          rows = 0
          const r = await call(`/v1/runs/${id}/output?stream=stdout&offset=${3000 * size + 100}&limit=1500`)
          assert.ok(
            Buffer.from(await r.arrayBuffer()).equals(all.subarray(3000 * size + 100, 3000 * size + 1600)),
          )
          assert.ok(rows <= 3, `${rows} events read for 1500 bytes`)
        }

        // A replay from event 1000 on: the first page only, until the client reads on; then every event once.
        rows = 0
        const res = await call(`/v1/runs/${id}/events?encoding=base64`, {
          headers: { 'last-event-id': '1000' },
        })
        const reader = (res.body as ReadableStream<Uint8Array>).getReader()
        await reader.read()
        await sleep(50)
        assert.ok(rows <= 1001, `${rows} events read before the client read on`)
        const parts: Uint8Array[] = []
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          parts.push(value)
        }
        const seen = await eventsOf(Buffer.concat(parts).toString())
        const out = seen.filter((e) => e.event === 'output')
        assert.deepEqual(
          seen.map((e) => Number(e.id)),
          Array.from({ length: n + 1 - 1000 }, (_, i) => 1001 + i),
          'every event after 1000 once, in order, the end last',
        )
        assert.equal(seen.at(-1)?.event, 'end')
        const bytes = Buffer.concat(
          out.map((e) => Buffer.from((JSON.parse(e.data) as { data: string }).data, 'base64')),
        )
        assert.ok(bytes.equals(all.subarray(1000 * size)), 'the bytes after event 1000, once each')
      } finally {
        store.events = events
        store.outputSlices = slices
      }
    })

    it('ends the event stream of a key revoked meanwhile, within a heartbeat or so', async () => {
      const made = (await (
        await call('/v1/keys', {
          method: 'POST',
          body: JSON.stringify({ name: 'r', scopes: ['runs:write', 'runs:read'] }),
        })
      ).json()) as Json
      const key = made.key as string
      const id = await submit(['sleep', '3'], key)
      const res = await call(`/v1/runs/${id}/events`, { key })
      assert.equal(res.status, 200)
      const started = Date.now()
      assert.equal((await call(`/v1/keys/${made.id}`, { method: 'DELETE' })).status, 204)
      const text = await res.text()
      assert.ok(Date.now() - started < 2000, `streamed ${Date.now() - started} ms after the revocation`)
      assert.match(text, /revoked/)
      assert.doesNotMatch(text, /event: end/)
      await call(`/v1/runs/${id}/cancel`, { method: 'POST' })
    })

    it('bounds the event streams a key holds open (429), and frees one when it ends', async () => {
      const id = await submit(['sleep', '3'])
      const aborts = [new AbortController(), new AbortController()]
      const open = await Promise.all(aborts.map((a) => call(`/v1/runs/${id}/events`, { signal: a.signal })))
      for (const r of open) assert.equal(r.status, 200)
      const third = await call(`/v1/runs/${id}/events`)
      assert.equal(third.status, 429)
      assert.equal(((await third.json()) as { error: Json }).error.code, 'quota')
      assert.ok(Number(third.headers.get('retry-after')) >= 1)
      aborts[0]?.abort()
      await open[0]?.body?.cancel().catch(() => {})
      await sleep(20)
      const again = await call(`/v1/runs/${id}/events`)
      assert.equal(again.status, 200)
      await again.body?.cancel()
      await open[1]?.body?.cancel()
      await call(`/v1/runs/${id}/cancel`, { method: 'POST' })
    })

    it('bounds the long polls a key holds (429)', async () => {
      const id = await submit(['sleep', '3'])
      const held = call(`/v1/runs/${id}?wait=1s`)
      await sleep(20)
      const second = await call(`/v1/runs/${id}?wait=1s`)
      assert.equal(second.status, 429)
      assert.equal((await held).status, 200)
      const after = await call(`/v1/runs/${id}?wait=10ms`)
      assert.equal(after.status, 200, 'freed once answered')
      await call(`/v1/runs/${id}/cancel`, { method: 'POST' })
    })

    it('refuses a submission whose wait is past the key’s long polls before making its run', async () => {
      // The wait was taken after the run was made: a 429 told the client no while its run went on, and
      // a client retrying the refusal (Retry-After) made it again.
      const id = await submit(['sleep', '3'])
      const held = call(`/v1/runs/${id}?wait=1s`)
      await sleep(20)
      const count = () =>
        created.service.list(created.service.authenticate(admin) as KeyRecord, { limit: 1000 }).runs.length
      const before = count()
      const refused = await call('/v1/runs', {
        method: 'POST',
        body: JSON.stringify({ cmd: ['true'], wait: '5s' }),
      })
      assert.equal(refused.status, 429)
      assert.ok(refused.headers.get('retry-after'))
      assert.equal(count(), before, 'no run made')
      assert.equal((await held).status, 200)
      await call(`/v1/runs/${id}/cancel`, { method: 'POST' })
    })

    it('checks who owns a run without reading the run: its output, events and files read no result', async () => {
      // Every read checked its key by loading the run whole (its request, up to 8 MiB of files, and its
      // result: 192 MB of JSON for 16 MiB of control characters, escaped) once per 256 KiB piece of
      // output: a range of 8 MB held the server's thread 11.6 s, a read of 100 bytes 0.35 s.
      const { store, id } = storedRun('run_own')
      store.startRun(id, new Date().toISOString())
      const piece = Buffer.alloc(256 * 1024, 'a')
      for (let i = 0; i < 8; i++)
        store.appendEvent(id, 'output', {
          stream: 'stdout',
          offset: i * piece.length,
          bytes: piece.length,
          data: piece.toString('base64'),
        })
      let loads = 0
      const getRun = store.getRun.bind(store)
      store.getRun = (...args) => {
        loads++
        return getRun(...args)
      }
      try {
        const out = await call(`/v1/runs/${id}/output?stream=stdout&limit=${8 * piece.length}`)
        assert.equal((await out.arrayBuffer()).byteLength, 8 * piece.length)
        await (await call(`/v1/runs/${id}/files`)).text()
        assert.ok(loads <= 1, `the run was loaded ${loads} times to read its output and files`)
        const other = await call(`/v1/runs/run_nosuch/output?stream=stdout`)
        assert.equal(other.status, 404)
      } finally {
        store.getRun = getRun
      }
    })

    it('refuses a big view past the answers being sent before loading the run', async () => {
      // A view past the budget was refused (503) only after the run was loaded and its answer built: a
      // view of 192 MB (16 MiB of control characters, escaped) cost the server 1.6 s a request, refused
      // or not, and a key asking again and again held its thread.
      const { store, id } = storedRun('run_big')
      const out = Buffer.alloc(400 * 1024, 'a')
      store.appendEvent(id, 'output', {
        stream: 'stdout',
        offset: 0,
        bytes: out.length,
        data: out.toString('base64'),
      })
      store.finishRun(
        id,
        { ...errorResult('x', 'y'), status: 'ok', violation: null, stdout: out.toString() },
        new Date().toISOString(),
      )
      const tight = createApp(created.service, {
        maxAnswerBytesInFlight: 1,
        maxAnswerBytesInFlightPerKey: 1,
      }).app
      const get = () => tight.request(`/v1/runs/${id}`, { headers: { authorization: `Bearer ${admin}` } })
      const held = await get()
      assert.equal(held.status, 200)
      let loads = 0
      const getRun = store.getRun.bind(store)
      store.getRun = (...args) => {
        loads++
        return getRun(...args)
      }
      try {
        const refused = await get()
        assert.equal(refused.status, 503)
        assert.ok(refused.headers.get('retry-after'))
        assert.equal(loads, 0, 'the run was loaded for a view refused')
      } finally {
        store.getRun = getRun
      }
      assert.equal(((await held.json()) as { result: { stdout: string } }).result.stdout.length, 400 * 1024)
      const again = await get()
      assert.equal(again.status, 200, 'served once the first is read')
      await again.body?.cancel()
    })

    it('lists runs by their summary, and sends a whole view a piece at a time as it is read', async () => {
      // A listing held each run's whole result: 8 lists of a run with 16 MiB of control characters (192 MB
      // of escaped JSON each, parsed and built again) held the server's thread for seconds, /healthz with it.
      const { store, id } = storedRun('run_listed')
      store.startRun(id, new Date().toISOString())
      const piece = Buffer.alloc(64 * 1024, 0x01)
      const n = 64
      for (let i = 0; i < n; i++)
        store.appendEvent(id, 'output', {
          stream: 'stdout',
          offset: i * piece.length,
          bytes: piece.length,
          data: piece.toString('base64'),
        })
      const text = Buffer.alloc(n * piece.length, 0x01).toString('utf8')
      store.finishRun(
        id,
        {
          ...errorResult('x', 'y'),
          status: 'ok',
          violation: null,
          stdout: text,
          output: text,
          outputBytes: text.length,
        },
        new Date().toISOString(),
      )
      const list = await call('/v1/runs?limit=1')
      const page = await list.text()
      assert.ok(page.length < 4096, `a page of one run was ${page.length} bytes`)
      const listed = (JSON.parse(page) as { runs: { id: string; result: Json }[] }).runs[0]
      assert.equal(listed?.id, id)
      assert.equal(listed?.result.status, 'ok')
      assert.equal('stdout' in (listed?.result ?? {}), false)
      const summary = (await (await call(`/v1/runs/${id}?view=summary`)).json()) as { result: Json }
      assert.deepEqual(summary.result, listed?.result)

      // The whole view: its output read an event at a time, as the client takes it.
      let read = 0
      const chunks = store.outputChunks.bind(store)
      store.outputChunks = (...args) => {
        const got = chunks(...args)
        read += got.length
        return got
      }
      try {
        const res = await call(`/v1/runs/${id}`)
        assert.equal(res.status, 200)
        const reader = (res.body as ReadableStream<Uint8Array>).getReader()
        const parts = [(await reader.read()).value as Uint8Array]
        await sleep(50)
        assert.ok(read < n / 4, `${read} of ${n} output events read before the client read on`)
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          parts.push(value)
        }
        const view = JSON.parse(Buffer.concat(parts).toString()) as {
          result: { stdout: string; output: string }
        }
        assert.ok(view.result.stdout === text && view.result.output === text, 'the whole text, exactly')
      } finally {
        store.outputChunks = chunks
      }
    })

    it('sends a whole view of 200 MB to a fast client without holding the thread', async () => {
      // A client reading as fast as loopback goes had each write done at once and the next piece asked
      // for at once: the view of 16 MiB of control characters (200 MB of JSON) was made in one stretch,
      // timers and /healthz held 1.2 s (19 s when it was built whole).
      const { store, id } = storedRun('run_fast')
      store.startRun(id, new Date().toISOString())
      const piece = Buffer.alloc(64 * 1024, 0x01)
      const n = 256
      for (let i = 0; i < n; i++)
        store.appendEvent(id, 'output', {
          stream: 'stdout',
          offset: i * piece.length,
          bytes: piece.length,
          data: piece.toString('base64'),
        })
      const text = Buffer.alloc(n * piece.length, 0x01).toString('utf8')
      store.finishRun(
        id,
        {
          ...errorResult('x', 'y'),
          status: 'ok',
          violation: null,
          stdout: text,
          output: text,
          outputBytes: text.length,
        },
        new Date().toISOString(),
      )
      const server = serveHttp({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
      await once(server, 'listening')
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/runs/${id}`
      const reader = `fetch(${JSON.stringify(url)}, { headers: { authorization: ${JSON.stringify(`Bearer ${admin}`)} } })
        .then(async (r) => { let n = 0; for await (const c of r.body) n += c.length; console.log(n) })`
      const delay = monitorEventLoopDelay({ resolution: 5 })
      delay.enable()
      const started = Date.now()
      const got = await new Promise<string>((resolve, reject) =>
        execFile(process.execPath, ['-e', reader], (error, out) => (error ? reject(error) : resolve(out))),
      )
      const ms = Date.now() - started
      delay.disable()
      server.close()
      const worst = delay.max / 1e6
      assert.ok(Number(got) > 12 * n * piece.length, `${got} bytes sent`)
      assert.ok(worst < Math.max(300, ms / 3), `the thread was held ${worst.toFixed(0)} ms of ${ms}`)
    })

    it('answers a malformed escape in a file path with 404, not 500', async () => {
      const id = await submit(['true'])
      for (const p of [
        '%zz',
        '%E0%A4%A',
        'a%00b',
        '%2e%2e%2f%2e%2e%2fcordon.db',
        '%252e%252e%252fcordon.db',
      ]) {
        const res = await call(`/v1/runs/${id}/files/${p}`)
        assert.equal(res.status, 404, p)
        assert.equal(((await res.json()) as { error: Json }).error.code, 'not-found')
      }
    })
  })
})

/** The events of an SSE text (comments skipped), by the client's parser. */
async function eventsOf(text: string): Promise<{ id: string; event: string; data: string }[]> {
  const out: { id: string; event: string; data: string }[] = []
  for await (const m of parseSse(new Response(text).body as ReadableStream<Uint8Array>)) {
    if (m.id !== null) out.push({ id: m.id, event: m.event, data: m.data })
  }
  return out
}
