// test: slow (waits out the server's header and body timeouts)
// `serve`'s listener against clients that only hold connections: bounded in number, and slow headers or
// bodies are cut off by the server's timeouts.
import assert from 'node:assert/strict'
import { readdirSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { serve } from '../../src/service/serve.js'
import { createService } from '../../src/service/service.js'
import type { KeyRecord } from '../../src/service/types.js'
import { noNamespace, tempDir } from '../helpers.js'

type Made = Awaited<ReturnType<typeof createService>>

/**
 * A real server on a fresh data dir, and its admin key; `before` makes more keys while the store is
 * open. `api` asks as `as` (the admin key unless told).
 */
async function served<T = undefined>(prefix: string, before?: (made: Made, admin: KeyRecord) => T) {
  const dataDir = tempDir(prefix)
  const made = await createService({ dataDir })
  const key = made.adminKey as string
  const extra = before?.(made, made.service.authenticate(key) as KeyRecord) as T
  await made.service.close()
  const server = await serve({ dataDir, port: 0 })
  const { hostname, port } = new URL(server.url)
  const api = (p: string, init: RequestInit = {}, as = key) =>
    fetch(`${server.url}${p}`, { ...init, headers: { authorization: `Bearer ${as}`, ...init.headers } })
  return { server, key, hostname, port, api, extra }
}

describe('serve limits', () => {
  it('holds at most maxConnections connections: past it the oldest idle one gives way', async () => {
    const server = await serve({ dataDir: tempDir('cordon-serve-limits-'), port: 0, maxConnections: 3 })
    const { hostname, port } = new URL(server.url)
    const sockets: Socket[] = []
    const closed = new Set<Socket>()
    try {
      const open = () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect(Number(port), hostname, () => resolve(s)).on('error', reject)
          s.on('data', () => {})
          s.on('close', () => closed.add(s))
          sockets.push(s)
        })
      for (let i = 0; i < 3; i++) await open()
      await new Promise((r) => setTimeout(r, 50))
      // Three idle connections: a fourth takes the oldest one's slot.
      const fourth = await open()
      await new Promise((r) => setTimeout(r, 300))
      assert.deepEqual([...closed], [sockets[0]], 'the oldest idle connection gave way')
      assert.ok(!closed.has(fourth))
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})

describe('serve: answers held for clients that do not read', { skip: noNamespace }, () => {
  // A collected file was read whole into memory for each request, and /output built its whole range
  // (up to 8 MiB) before sending: 20 connections that asked for a 60 MB file and read nothing held
  // 1.1 GiB of the server. An answer is now read from disk or the store as the client takes it.
  it('holds little per connection, however big the file or the range asked', async () => {
    const { server, key, hostname, port, api } = await served('cordon-serve-slow-')
    const sockets: Socket[] = []
    try {
      const body = {
        cmd: ['sh', '-c', 'head -c 60000000 /dev/zero > big; head -c 8000000 /dev/zero | tr "\\0" a'],
        collect: ['big'],
        options: { limits: { maxOutputBytes: '8M', wallTimeMs: '60s' } },
        wait: '60s',
      }
      const run = (await (await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) })).json()) as {
        id: string
        result: { status: string; outputBytes: number }
      }
      assert.equal(run.result.status, 'ok')
      // What a reading client gets is whole.
      const file = await api(`/v1/runs/${run.id}/files/big`)
      assert.equal((await file.arrayBuffer()).byteLength, 60_000_000)
      const out = await api(`/v1/runs/${run.id}/output?stream=stdout&offset=100&limit=8000000`)
      assert.equal((await out.arrayBuffer()).byteLength, 8_000_000 - 100)
      const part = await api(`/v1/runs/${run.id}/output?stream=stdout&offset=10&limit=5`)
      assert.equal(await part.text(), 'aaaaa')

      const before = process.memoryUsage().arrayBuffers
      for (const p of [`files/big`, `output?stream=stdout&limit=8000000`]) {
        for (let i = 0; i < 15; i++) {
          const s = connect(Number(port), hostname)
          s.on('error', () => {})
          s.write(
            `GET /v1/runs/${run.id}/${p} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\n\r\n`,
          )
          s.pause()
          sockets.push(s)
        }
      }
      await new Promise((r) => setTimeout(r, 2000))
      const grew = (process.memoryUsage().arrayBuffers - before) / 2 ** 20
      assert.ok(grew < 100, `the server holds ${grew.toFixed(0)} MiB more for 30 clients that read nothing`)
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})

describe('serve: run views held for clients that do not read', { skip: noNamespace }, () => {
  // A run's view carries its result (stdout, stderr and output, each up to the output ceiling): every
  // GET of it built and held the whole answer until its client read it, however many clients.
  it('holds a bounded number of bytes of answers per key; past it, 503 with Retry-After', async () => {
    const { server, key, hostname, port, api } = await served('cordon-serve-views-')
    const sockets: Socket[] = []
    try {
      const body = {
        cmd: ['sh', '-c', 'head -c 12000000 /dev/zero | tr "\\0" a'],
        options: { limits: { maxOutputBytes: '12M', wallTimeMs: '60s' } },
        wait: '60s',
      }
      const submitted = await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) })
      const run = (await submitted.json()) as { id: string; result: { status: string; stdout: string } }
      assert.equal(run.result.stdout.length, 12_000_000)
      global.gc?.()
      const before = process.memoryUsage().rss
      for (let i = 0; i < 20; i++) {
        const s = connect(Number(port), hostname)
        s.on('error', () => {})
        s.write(
          `GET /v1/runs/${run.id} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\n\r\n`,
        )
        s.pause()
        sockets.push(s)
      }
      await new Promise((r) => setTimeout(r, 3000))
      global.gc?.()
      const grew = (process.memoryUsage().rss - before) / 2 ** 20
      assert.ok(grew < 250, `the server holds ${grew.toFixed(0)} MiB more for 20 clients that read nothing`)
      // Past the key's share, a view is refused for now rather than held.
      const busy = await api(`/v1/runs/${run.id}`)
      assert.equal(busy.status, 503)
      assert.ok(busy.headers.get('retry-after'))
      for (const s of sockets) s.destroy()
      sockets.length = 0
      await new Promise((r) => setTimeout(r, 500))
      const again = await api(`/v1/runs/${run.id}`)
      assert.equal(again.status, 200)
      assert.equal(((await again.json()) as { result: { stdout: string } }).result.stdout.length, 12_000_000)
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})

describe('serve: HEAD holds nothing', { skip: noNamespace }, () => {
  // Hono answers HEAD by running the GET route and dropping its body unread, never cancelled: a file's
  // fd stayed open, a big view's bytes stayed counted against the answer budget, and an event stream
  // kept its place among the key's streams, each for the server's life, one per HEAD.
  it('gives back the fd, the answer budget and the stream of every HEAD', async () => {
    const { server, api } = await served('cordon-serve-head-')
    const fds = () => readdirSync('/proc/self/fd').length
    try {
      const body = {
        cmd: ['sh', '-c', 'head -c 1000000 /dev/zero > f; head -c 12000000 /dev/zero | tr "\\0" a'],
        collect: ['f'],
        options: { limits: { maxOutputBytes: '12M', wallTimeMs: '60s' } },
        wait: '60s',
      }
      const run = (await (await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) })).json()) as {
        id: string
        result: { status: string }
      }
      assert.equal(run.result.status, 'ok')

      const before = fds()
      for (let i = 0; i < 40; i++) {
        const head = await api(`/v1/runs/${run.id}/files/f`, { method: 'HEAD' })
        assert.equal(head.status, 200)
        assert.equal(head.headers.get('content-length'), '1000000')
      }
      await new Promise((r) => setTimeout(r, 200))
      assert.ok(fds() - before < 10, `${fds() - before} fds more after 40 HEADs of a file`)

      for (let i = 0; i < 12; i++) {
        const head = await api(`/v1/runs/${run.id}`, { method: 'HEAD' })
        assert.equal(head.status, 200)
      }
      const view = await api(`/v1/runs/${run.id}`)
      assert.equal(view.status, 200, 'a view after HEADs of it is not refused as busy')
      assert.equal(((await view.json()) as { result: { stdout: string } }).result.stdout.length, 12_000_000)

      for (let i = 0; i < 12; i++) await api(`/v1/runs/${run.id}/events`, { method: 'HEAD' })
      const events = await api(`/v1/runs/${run.id}/events`)
      assert.equal(events.status, 200, 'an event stream after HEADs of it is not refused (429)')
      assert.match(await events.text(), /event: end/)
    } finally {
      await server.close()
    }
  })
})

describe('serve: downloads held by clients that do not read', { skip: noNamespace }, () => {
  // A collected file or a range of output is sent as the client reads, and a response has no timeout:
  // a client that asked and read nothing held its connection, an fd (a file) and a piece, for as long
  // as it liked. One key could so take every connection the server allows (1024), for good.
  it('holds a bounded number of answers being sent per key; past it, 429; another key is served', async () => {
    const {
      server,
      key,
      hostname,
      port,
      api,
      extra: other,
    } = await served(
      'cordon-serve-downloads-',
      (made, admin) =>
        made.service.createKey(admin, { name: 'other', scopes: ['runs:read', 'runs:write'] }).key,
    )
    const sockets: Socket[] = []
    try {
      const body = {
        cmd: ['sh', '-c', 'head -c 40000000 /dev/zero > big'],
        collect: ['big'],
        options: { limits: { wallTimeMs: '60s' } },
        wait: '60s',
      }
      const mine = (await (await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) })).json()) as {
        id: string
      }
      const theirs = (await (
        await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) }, other)
      ).json()) as { id: string }
      const held = () => {
        const s = connect(Number(port), hostname)
        s.on('error', () => {})
        s.write(
          `GET /v1/runs/${mine.id}/files/big HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\n\r\n`,
        )
        s.pause()
        sockets.push(s)
      }
      for (let i = 0; i < 40; i++) held()
      await new Promise((r) => setTimeout(r, 1500))
      const refused = await api(`/v1/runs/${mine.id}/files/big`)
      assert.equal(refused.status, 429, 'a key holding many unread answers is refused another')
      assert.ok(refused.headers.get('retry-after'))
      await refused.body?.cancel()
      const served = await api(`/v1/runs/${theirs.id}/files/big`, {}, other)
      assert.equal(served.status, 200)
      assert.equal((await served.arrayBuffer()).byteLength, 40_000_000)
      for (const s of sockets) s.destroy()
      sockets.length = 0
      await new Promise((r) => setTimeout(r, 500))
      const again = await api(`/v1/runs/${mine.id}/files/big`)
      assert.equal(again.status, 200)
      assert.equal((await again.arrayBuffer()).byteLength, 40_000_000)
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})

describe('serve: a revoked key’s downloads', { skip: noNamespace }, () => {
  // Revoking a key ended its event streams at once, but not the files and output it was being sent:
  // a revoked key's client that reads nothing went on holding its connections and fds.
  it('end when the key is revoked, read or not', async () => {
    const {
      server,
      key: admin,
      hostname,
      port,
      api: asAnyKey,
      extra: created,
    } = await served('cordon-serve-revoked-', (made, admin) =>
      made.service.createKey(admin, { name: 'doomed', scopes: ['runs:read', 'runs:write'] }),
    )
    const sockets: Socket[] = []
    const api = (p: string, init: RequestInit = {}, as = created.key) => asAnyKey(p, init, as)
    try {
      const body = {
        cmd: ['sh', '-c', 'head -c 40000000 /dev/zero > big; head -c 8000000 /dev/zero'],
        collect: ['big'],
        options: { limits: { maxOutputBytes: '8M', wallTimeMs: '60s' } },
        wait: '60s',
      }
      const run = (await (await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) })).json()) as {
        id: string
      }
      const received: Promise<number>[] = []
      for (const p of ['files/big', 'output?stream=stdout&limit=8000000']) {
        const s = connect(Number(port), hostname)
        s.on('error', () => {})
        s.write(
          `GET /v1/runs/${run.id}/${p} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${created.key}\r\n\r\n`,
        )
        s.pause()
        sockets.push(s)
        received.push(
          new Promise((resolve) => {
            let bytes = 0
            s.on('data', (d: Buffer) => {
              bytes += d.length
            })
            s.once('close', () => resolve(bytes))
          }),
        )
      }
      await new Promise((r) => setTimeout(r, 1000))
      const revoked = await api(`/v1/keys/${created.record.id}`, { method: 'DELETE' }, admin)
      assert.equal(revoked.status, 204)
      await new Promise((r) => setTimeout(r, 500))
      // What the clients read from now on is what was sent before the revocation, then the end.
      for (const s of sockets) s.resume()
      const [file, output] = await Promise.all(received)
      assert.ok((file as number) < 40_000_000, `${file} bytes of the file after the revocation`)
      assert.ok((output as number) < 8_000_000, `${output} bytes of output after the revocation`)
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})

describe('serve: event streams held for clients that do not read', { skip: noNamespace }, () => {
  // The `end` event carried the whole result (stdout, stderr and output: three copies of the output)
  // and was queued whole for its client, however slowly it read: eight streams of a key that asked for
  // a run's end and read nothing held hundreds of MiB of the server.
  it('an end event carries the verdict, not the output the stream delivered, and holds little', async () => {
    const { server, key, hostname, port, api } = await served('cordon-serve-end-')
    const sockets: Socket[] = []
    try {
      const body = {
        cmd: [
          'sh',
          '-c',
          'head -c 12000000 /dev/zero | tr "\\0" a; echo "{\\"msg\\":\\"hi\\"}" >&$CORDON_LOG_FD',
        ],
        options: { limits: { maxOutputBytes: '12M', wallTimeMs: '60s' } },
        wait: '60s',
      }
      const submitted = await api('/v1/runs', { method: 'POST', body: JSON.stringify(body) })
      const run = (await submitted.json()) as { id: string; result: { status: string; stdout: string } }
      assert.equal(run.result.status, 'ok')
      assert.equal(run.result.stdout.length, 12_000_000)
      // A reading client: every output byte came in output events, and the end says how it ended.
      const text = await (await api(`/v1/runs/${run.id}/events?encoding=base64`)).text()
      const blocks = text.split('\n\n').filter((b) => b.startsWith('id: '))
      let bytes = 0
      for (const b of blocks.filter((b) => b.includes('\nevent: output\n'))) {
        bytes += (JSON.parse(b.slice(b.indexOf('\ndata: ') + 7)) as { bytes: number }).bytes
      }
      assert.equal(bytes, 12_000_000)
      const last = blocks.at(-1) as string
      assert.match(last, /\nevent: end\n/)
      assert.ok(last.length < 64 * 1024, `the end event is ${last.length} bytes`)
      const end = JSON.parse(last.slice(last.indexOf('\ndata: ') + 7)) as { result: Record<string, unknown> }
      assert.equal(end.result.status, 'ok')
      assert.equal(end.result.exitCode, 0)
      assert.equal(end.result.outputBytes, 12_000_000)
      for (const field of ['stdout', 'stderr', 'output', 'logs', 'network'])
        assert.ok(!(field in end.result), `end carries no ${field}`)
      const endSeq = Number(/^id: (\d+)/.exec(last)?.[1])

      global.gc?.()
      const before = process.memoryUsage().rss
      // Eight streams (the key's most) that ask for the end alone and read nothing.
      for (let i = 0; i < 8; i++) {
        const s = connect(Number(port), hostname)
        s.on('error', () => {})
        s.write(
          `GET /v1/runs/${run.id}/events HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\n` +
            `Last-Event-ID: ${endSeq - 1}\r\n\r\n`,
        )
        s.pause()
        sockets.push(s)
      }
      await new Promise((r) => setTimeout(r, 3000))
      global.gc?.()
      const grew = (process.memoryUsage().rss - before) / 2 ** 20
      assert.ok(grew < 100, `the server holds ${grew.toFixed(0)} MiB more for 8 streams that read nothing`)
      // The whole result is the run view's.
      const view = (await (await api(`/v1/runs/${run.id}`)).json()) as {
        result: { stdout: string; logs: unknown[] }
      }
      assert.equal(view.result.stdout.length, 12_000_000)
      assert.equal(view.result.logs.length, 1)
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})
