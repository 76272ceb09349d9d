// `cordon serve` as an operator runs it, the parts about running it: one server per data dir, exact
// back-pressure over real HTTP, --max-connections, and who may read /metrics.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { parseSse } from '../../src/client/client.js'
import { SIGNATURE_HEADER, verifyWebhook } from '../../src/service/webhook.js'
import { type Served, startServe, tempDir, waitFor } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

const api =
  (s: Served, key: string) =>
  (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${key}`)
    return fetch(`${s.url}${path}`, { ...init, headers })
  }

const stop = async (s: Served) => {
  s.child.kill('SIGTERM')
  assert.equal(await s.exited, 0, s.stderr())
}

/** `cordon serve` expected to stop by itself: its exit code, output and how long it took. */
function serveToExit(dir: string) {
  return new Promise<{ status: number | null; stdout: string; stderr: string; ms: number }>((resolve) => {
    const started = Date.now()
    const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--data-dir', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    child.on('close', (status) => {
      clearTimeout(timer)
      resolve({ status, stdout, stderr, ms: Date.now() - started })
    })
  })
}

const keysCli = (dir: string, ...args: string[]) =>
  spawnSync(process.execPath, [CLI, 'keys', ...args, '--data-dir', dir], {
    encoding: 'utf8',
    timeout: 30_000,
  })

describe('cordon serve, operated', { timeout: 300_000 }, () => {
  it('one server per data dir: a second is refused at once (125, naming it); SIGKILL frees it', async () => {
    const dir = tempDir('cordon-ops-')
    const first = await startServe(dir)
    const second = await serveToExit(dir)
    assert.equal(second.status, 125, second.stderr)
    assert.ok(second.ms < 10_000, `refused at once, not after ${second.ms} ms`)
    assert.equal(second.stdout, '', 'it never listened')
    assert.match(second.stderr, /^cordon: .* is in use by another cordon serve/)
    assert.ok(second.stderr.includes(dir), second.stderr)
    assert.equal(second.stderr.split('\n').filter(Boolean).length, 1, 'one line, no stack')
    // The first is untouched, and `cordon keys` still works beside it.
    assert.equal((await fetch(`${first.url}/healthz`)).status, 200)
    const made = keysCli(dir, 'create', '--name', 'beside', '--json')
    assert.equal(made.status, 0, made.stderr)
    assert.equal(keysCli(dir, 'list').status, 0)
    assert.equal((await api(first, JSON.parse(made.stdout).key)('/v1/runs')).status, 200)

    first.child.kill('SIGKILL')
    await first.exited
    const third = await startServe(dir)
    assert.equal((await api(third, first.adminKey as string)('/v1/runs')).status, 200)
    await stop(third)
  })

  it('back-pressure is exact: 2 running + 5 queued, the next is 503; a key over quota is 429', async () => {
    const dir = tempDir('cordon-ops-')
    const s = await startServe(dir, ['--concurrency', '2', '--max-queued', '5'])
    const admin = api(s, s.adminKey as string)
    const quotaKey = (await (
      await admin('/v1/keys', {
        method: 'POST',
        body: JSON.stringify({
          name: 'q',
          scopes: ['runs:write', 'runs:read'],
          quota: { concurrentRuns: 1 },
        }),
      })
    ).json()) as { key: string }
    const limited = api(s, quotaKey.key)
    // Each run holds its slot until its stdin is closed, then prints what it was given.
    const body = JSON.stringify({ cmd: ['cat'], stdin: 'open' })
    const first = await limited('/v1/runs', { method: 'POST', body })
    assert.equal(first.status, 201)
    const answers = await Promise.all(
      Array.from({ length: 7 }, () => admin('/v1/runs', { method: 'POST', body })),
    )
    const statuses = answers.map((r) => r.status).sort()
    assert.deepEqual(statuses, [201, 201, 201, 201, 201, 201, 503], 'of 8, exactly the 8th is refused')
    const full = answers.find((r) => r.status === 503) as Response
    assert.equal(((await full.json()) as { error: { code: string } }).error.code, 'queue-full')
    assert.ok(Number(full.headers.get('retry-after')) >= 1, 'Retry-After on 503')
    // Over its quota (1 at once), the key is told 429 (its quota is judged before the full queue).
    const over = await limited('/v1/runs', { method: 'POST', body })
    assert.equal(over.status, 429)
    assert.equal(((await over.json()) as { error: { code: string } }).error.code, 'quota')
    assert.ok(Number(over.headers.get('retry-after')) >= 1, 'Retry-After on 429')

    const accepted = [first, ...answers.filter((r) => r.status === 201)]
    const ids: string[] = []
    for (const r of accepted) ids.push(((await r.json()) as { id: string }).id)
    assert.equal(ids.length, 7)
    const listed = (await (await admin('/v1/runs?limit=100')).json()) as { runs: { id: string }[] }
    assert.deepEqual(listed.runs.map((r) => r.id).sort(), [...ids].sort(), 'the refused ones left no run')
    for (const id of ids) {
      assert.equal((await admin(`/v1/runs/${id}/stdin`, { method: 'POST', body: id })).status, 204)
      assert.equal((await admin(`/v1/runs/${id}/stdin`, { method: 'DELETE' })).status, 204)
    }
    for (const id of ids) {
      const run = (await (await admin(`/v1/runs/${id}?wait=60s`)).json()) as {
        state: string
        result: { status: string; stdout: string }
      }
      assert.equal(run.state, 'finished')
      assert.equal(run.result.status, 'ok')
      assert.equal(run.result.stdout, id, 'each run ran its own input')
      const events = await admin(`/v1/runs/${id}/events`)
      const types: string[] = []
      for await (const m of parseSse(events.body as ReadableStream<Uint8Array>)) if (m.id) types.push(m.event)
      assert.equal(types.filter((t) => t === 'started').length, 1, `${id} started once: ${types}`)
      assert.equal(types.filter((t) => t === 'end').length, 1, `${id} ended once: ${types}`)
    }
    await stop(s)
  })

  it('--max-connections N: connection N+1 takes the slot of the oldest idle one', async () => {
    const s = await startServe(tempDir('cordon-ops-'), ['--max-connections', '2'])
    const { hostname, port } = new URL(s.url)
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const socket = connect(Number(port), hostname, () => resolve(socket)).on('error', reject)
        socket.on('data', () => {})
      })
    const closedSoon = (socket: Socket) =>
      new Promise<boolean>((resolve) => {
        socket.once('close', () => resolve(true))
        setTimeout(() => resolve(false), 1000)
      })
    const held = [await open(), await open()]
    await new Promise((r) => setTimeout(r, 100))
    const extra = await open()
    assert.ok(await closedSoon(held[0] as Socket), 'the oldest idle connection gave way')
    const res = await fetch(`${s.url}/healthz`)
    assert.equal(res.status, 200, 'a client with a request is served')
    await res.text()
    assert.ok(held[1]?.destroyed || extra.destroyed, 'and two connections at most were held')
    held[1]?.destroy()
    extra.destroy()
    await stop(s)
  })

  it('--max-connections-per-address N: an address past N pushes out its own oldest', async () => {
    const s = await startServe(tempDir('cordon-ops-'), ['--max-connections-per-address', '2'])
    const { hostname, port } = new URL(s.url)
    const sockets: Socket[] = []
    const closed: Socket[] = []
    for (let i = 0; i < 5; i++) {
      const socket = connect(Number(port), hostname)
      socket.on('data', () => {})
      socket.on('close', () => closed.push(socket))
      sockets.push(socket)
      await new Promise((r) => setTimeout(r, 50))
    }
    await new Promise((r) => setTimeout(r, 300))
    assert.deepEqual(closed, sockets.slice(0, 3), 'the three oldest gave way')
    for (const socket of sockets) socket.destroy()
    await stop(s)
  })

  it('/metrics needs an admin key unless --public-metrics; /openapi.json needs none', async () => {
    const closed = await startServe(tempDir('cordon-ops-'))
    assert.equal((await fetch(`${closed.url}/metrics`)).status, 401)
    const user = (await (
      await api(closed, closed.adminKey as string)('/v1/keys', {
        method: 'POST',
        body: JSON.stringify({ name: 'u', scopes: ['runs:read'] }),
      })
    ).json()) as { key: string }
    assert.equal((await api(closed, user.key)('/metrics')).status, 403)
    const ok = await api(closed, closed.adminKey as string)('/metrics')
    assert.equal(ok.status, 200)
    assert.match(await ok.text(), /cordon_http_request_duration_seconds/)
    assert.equal((await fetch(`${closed.url}/openapi.json`)).status, 200)
    await stop(closed)

    const open = await startServe(tempDir('cordon-ops-'), ['--public-metrics'])
    const res = await fetch(`${open.url}/metrics`)
    assert.equal(res.status, 200)
    assert.match(await res.text(), /cordon_http_request_duration_seconds/)
    await stop(open)
  })

  it('a webhook retry survives a SIGKILL: the restarted server delivers it, every attempt kept', async () => {
    // The target answers 500 until it is told to be up.
    let up = false
    const got: { body: string; signature: string }[] = []
    const target = createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8').on('data', (t: string) => (body += t))
      req.on('end', () => {
        got.push({ body, signature: String(req.headers[SIGNATURE_HEADER.toLowerCase()]) })
        res.statusCode = up ? 200 : 500
        res.end()
      })
    })
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve))
    const hook = `http://127.0.0.1:${(target.address() as AddressInfo).port}/hook`
    const dir = tempDir('cordon-ops-')
    const attempts = () => {
      const db = new Database(path.join(dir, 'cordon.db'), { readonly: true, fileMustExist: true })
      try {
        return db.prepare('SELECT attempt, status FROM webhook_attempts ORDER BY attempt').all() as {
          attempt: number
          status: number | null
        }[]
      } finally {
        db.close()
      }
    }
    try {
      const first = await startServe(dir, ['--allow-private-webhooks'])
      const made = (await (
        await api(first, first.adminKey as string)('/v1/keys', {
          method: 'POST',
          body: JSON.stringify({ name: 'hooks', scopes: ['runs:write', 'runs:read'] }),
        })
      ).json()) as { key: string; webhookSecret: string }
      const res = await api(first, made.key)('/v1/runs', {
        method: 'POST',
        body: JSON.stringify({ cmd: ['echo', 'hooked'], webhook: { url: hook }, wait: '30s' }),
      })
      const { id } = (await res.json()) as { id: string }
      assert.ok(await waitFor(() => attempts().length === 1, 20_000), 'the first attempt is recorded')
      first.child.kill('SIGKILL')
      await first.exited
      assert.deepEqual(attempts(), [{ attempt: 1, status: 500 }])
      assert.equal(got.length, 1)

      up = true
      const second = await startServe(dir, ['--allow-private-webhooks'])
      assert.ok(await waitFor(() => got.length === 2, 20_000), 'the retry arrives after the restart')
      assert.ok(await waitFor(() => attempts().length === 2, 5000))
      assert.deepEqual(attempts(), [
        { attempt: 1, status: 500 },
        { attempt: 2, status: 200 },
      ])
      const { body, signature } = got[1] as { body: string; signature: string }
      assert.ok(verifyWebhook(made.webhookSecret, body, signature), 'signed with the key’s secret')
      assert.equal((JSON.parse(body) as { id: string }).id, id)
      await new Promise((r) => setTimeout(r, 1500))
      assert.equal(got.length, 2, 'delivered once: no retry after the 200')
      await stop(second)
      const again = await startServe(dir, ['--allow-private-webhooks'])
      await new Promise((r) => setTimeout(r, 1500))
      assert.equal(got.length, 2, 'a delivery that is over is not resumed')
      await stop(again)
    } finally {
      target.close()
    }
  })
})
