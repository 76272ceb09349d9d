// `cordon serve` and a run's open stdin: what a client wrote and was told was taken (204) outlives a
// server killed with SIGKILL, and the bounds on what the server holds of it.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Served, startServe, tempDir } from '../helpers.js'

const api =
  (s: Served, key: string) =>
  (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers)
    headers.set('authorization', `Bearer ${key}`)
    return fetch(`${s.url}${path}`, { ...init, headers })
  }

type Run = { id: string; state: string; result?: { status: string; stdout: string } }

describe('cordon serve: open stdin', { timeout: 180_000 }, () => {
  it('keeps the stdin a queued run was sent across a SIGKILL: the restarted server feeds it', async () => {
    // Written and closed (204) while the run waited, it lived only in the server's memory: after a crash
    // the run started with an empty stdin, never closed, and hung to its wall time.
    const dir = tempDir('cordon-serve-stdin-')
    const first = await startServe(dir, ['--concurrency', '1'])
    const key = first.adminKey as string
    const call = api(first, key)
    const submit = async (body: object) =>
      (await (await call('/v1/runs', { method: 'POST', body: JSON.stringify(body) })).json()) as Run
    // The one slot is held, so the runs with stdin wait in the queue.
    const blocker = await submit({ cmd: ['sleep', '60'] })
    const limits = { limits: { wallTimeMs: '40s' } }
    const closed = await submit({ cmd: ['cat'], stdin: 'open', options: limits })
    const open = await submit({ cmd: ['cat'], stdin: 'open', options: limits })
    const write = async (c: typeof call, id: string, body?: string) =>
      (await c(`/v1/runs/${id}/stdin`, body === undefined ? { method: 'DELETE' } : { method: 'POST', body }))
        .status
    assert.equal(await write(call, closed.id, 'written '), 204)
    assert.equal(await write(call, closed.id, 'before\n'), 204)
    assert.equal(await write(call, closed.id), 204)
    assert.equal(await write(call, open.id, 'first '), 204)
    first.child.kill('SIGKILL')
    await first.exited

    const second = await startServe(dir, ['--concurrency', '1'])
    try {
      const again = api(second, key)
      const read = async (id: string, wait?: string) =>
        (await (await again(`/v1/runs/${id}${wait ? `?wait=${wait}` : ''}`)).json()) as Run
      assert.equal((await read(blocker.id)).result?.status, 'error', 'the running one: interrupted')
      assert.equal(await write(again, closed.id), 409, 'its stdin was closed')
      const fed = await read(closed.id, '20s')
      assert.equal(fed.state, 'finished', 'it had its stdin and its end')
      assert.equal(fed.result?.status, 'ok')
      assert.equal(fed.result?.stdout, 'written before\n')
      assert.equal(await write(again, open.id, 'then\n'), 204)
      assert.equal(await write(again, open.id), 204)
      const rest = await read(open.id, '20s')
      assert.equal(rest.result?.status, 'ok')
      assert.equal(rest.result?.stdout, 'first then\n')
    } finally {
      second.child.kill('SIGTERM')
      await second.exited
    }
  })
})
