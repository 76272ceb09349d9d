import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { chownSync, existsSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import type { RunResult } from '../../src/index.js'
import { DEFAULT_SERVER_LIMIT_CEILINGS } from '../../src/service/ceilings.js'
import { createService } from '../../src/service/service.js'
import { SqliteStore } from '../../src/service/sqlite.js'
import { endResult, type KeyRecord, type RunEvent, runView, ServiceError } from '../../src/service/types.js'
import { SIGNATURE_HEADER, verifyWebhook } from '../../src/service/webhook.js'
import { asUnprivileged, NOBODY, noNamespace, notRoot, noUnprivileged, tempDir } from '../helpers.js'

const skip = noNamespace

async function setup(options: Partial<Parameters<typeof createService>[0]> = {}) {
  const dataDir = path.join(tempDir('cordon-svc-'), 'data')
  const made = await createService({ dataDir, concurrency: options.concurrency ?? 2, ...options })
  const { service } = made
  const admin = service.authenticate(made.adminKey as string) as KeyRecord
  const user = (body: Record<string, unknown> = {}) => {
    const { key } = service.createKey(admin, {
      name: 'user',
      scopes: ['runs:write', 'runs:read'],
      ceilings: {},
      ...body,
    })
    return { token: key, key: service.authenticate(key) as KeyRecord }
  }
  return { dataDir, service, admin, user, adminKey: made.adminKey as string }
}

const rejects = (fn: () => unknown, code: string, field?: string) => {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof ServiceError, String(error))
    assert.equal(error.code, code, error.message)
    if (field !== undefined) assert.equal(error.field, field)
    return true
  })
}

/** Events of a run until its `end`, via follow (past first). */
function allEvents(service: Awaited<ReturnType<typeof setup>>['service'], key: KeyRecord, id: string) {
  return new Promise<RunEvent[]>((resolve) => {
    const got: RunEvent[] = []
    const take = (e: RunEvent) => {
      got.push(e)
      if (e.type === 'end') {
        sub.stop()
        resolve(got)
      }
    }
    const sub = service.events(key, id, 0, take)
    for (const e of sub.past) take(e)
  })
}

const closers: (() => Promise<void>)[] = []
after(async () => {
  for (const c of closers) await c()
})

describe('createService', { skip }, () => {
  // The data dir is hidden from the runs but for each one's workspace, named as its cwd: a data dir
  // reached through a symlink of the server's own uid must still run them (it is kept as its real path).
  it('runs requests with a data dir given through a symlink, not as root', {
    skip: notRoot || noUnprivileged(),
  }, async () => {
    const dir = tempDir('cordon-svc-link-', { mode: 0o755, parent: '/var/tmp' })
    chownSync(dir, NOBODY.uid, NOBODY.gid)
    const out = await asUnprivileged<{ status: string; stdout: string; message: string }>(`
      const { mkdirSync, symlinkSync } = await import('node:fs')
      const { createService } = await import(${JSON.stringify(new URL('../../dist/service/service.js', import.meta.url).href)})
      mkdirSync(${JSON.stringify(`${dir}/real`)})
      symlinkSync(${JSON.stringify(`${dir}/real`)}, ${JSON.stringify(`${dir}/link`)})
      const { service, adminKey } = await createService({ dataDir: ${JSON.stringify(`${dir}/link/data`)}, concurrency: 1 })
      const admin = service.authenticate(adminKey)
      const { key } = service.createKey(admin, { name: 'u', scopes: ['runs:write', 'runs:read'], ceilings: {} })
      const user = service.authenticate(key)
      const submitted = service.submit(user, { cmd: ['sh', '-c', 'echo hi'] })
      const done = await service.wait(user, submitted.id, 20_000)
      const stdout = service.result(user, done.id).stdout
      await service.close()
      return { status: done.result.status, stdout, message: done.result.violation?.message ?? '' }
    `)
    assert.deepEqual(out, { status: 'ok', stdout: 'hi\n', message: '' })
  })

  it('makes an admin key on the first start only', async () => {
    const { dataDir, service, admin, adminKey } = await setup()
    assert.match(adminKey, /^cordon_/)
    assert.ok(admin.scopes.includes('admin'))
    await service.close()
    const again = await createService({ dataDir })
    assert.equal(again.adminKey, undefined)
    assert.equal(again.service.authenticate(adminKey)?.id, admin.id)
    assert.equal(again.service.authenticate('cordon_nope'), null)
    await again.service.close()
  })

  it('runs a request end to end: result, events in order with no gap, output events as bytes', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const run = service.submit(key, { cmd: ['sh', '-c', 'echo hi; echo err >&2'], metadata: { job: '1' } })
    assert.match(run.id, /^run_/)
    assert.ok(['queued', 'running'].includes(run.state), 'as it is now: a free slot starts it at once')
    const events = await allEvents(service, key, run.id)
    const done = await service.wait(key, run.id, 10_000)
    assert.equal(done.state, 'finished')
    assert.equal(done.result?.status, 'ok', done.result?.violation?.message)
    assert.equal(service.result(key, done.id)?.stdout, 'hi\n')
    assert.equal(service.result(key, done.id)?.stderr, 'err\n')
    assert.deepEqual(done.metadata, { job: '1' })
    assert.deepEqual(
      events.map((e) => e.seq),
      events.map((_, i) => i + 1),
    )
    assert.equal(events[0]?.type, 'queued')
    assert.equal(events[1]?.type, 'started')
    assert.equal(events.at(-1)?.type, 'end')
    // The end says how it ended; the output, logs and connections were the events before it.
    assert.deepEqual(events.at(-1)?.data, { result: endResult(done.result as RunResult) })
    const out = events.filter((e) => e.type === 'output')
    const stream = (s: string) =>
      Buffer.concat(
        out.filter((e) => e.data.stream === s).map((e) => Buffer.from(String(e.data.data), 'base64')),
      )
    assert.equal(stream('stdout').toString(), 'hi\n')
    assert.equal(stream('stderr').toString(), 'err\n')
    for (const e of out) assert.equal(e.data.bytes, Buffer.from(String(e.data.data), 'base64').length)
    assert.equal(service.output(key, run.id, 'stdout', 0, 100).toString(), 'hi\n')
    assert.equal(service.output(key, run.id, 'stderr', 1, 2).toString(), 'rr')
    assert.deepEqual(
      service.events(key, run.id, events.length - 1, () => {}).past.map((e) => e.type),
      ['end'],
    )
  })

  it('bounds output events by time, not by how the program splits its writes', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    // 400 one-byte writes spread over ~1 s: each was its own event (≈150 bytes stored for 1 byte).
    const run = service.submit(key, {
      cmd: [
        'sh',
        '-c',
        'i=0; while [ $i -lt 400 ]; do printf x; [ $((i % 4)) = 0 ] && sleep 0.01; i=$((i+1)); done',
      ],
    })
    const done = await service.wait(key, run.id, 20_000)
    assert.equal(service.result(key, done.id)?.stdout, 'x'.repeat(400))
    const events = service.events(key, run.id, 0, () => {})
    events.stop()
    const output = events.past.filter((e) => e.type === 'output')
    const joined = Buffer.concat(output.map((e) => Buffer.from(String(e.data.data), 'base64'))).toString()
    assert.equal(joined, service.result(key, done.id)?.stdout)
    const ms = Date.parse(done.finishedAt ?? '') - Date.parse(done.startedAt ?? '')
    assert.ok(output.length <= ms / 20 + 2, `${output.length} output events in ${ms} ms`)
  })

  // Each switch between stdout and stderr ended the event being gathered, so a program alternating
  // one-byte writes made one stored event (~250 bytes of database) per byte, whatever the window.
  it('bounds output events by time when a program alternates between stdout and stderr', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const pairs = 3000
    const run = service.submit(key, {
      cmd: [
        'perl',
        '-e',
        `for (1..${pairs}) { syswrite STDOUT, "a"; select(undef, undef, undef, 0.0001); syswrite STDERR, "b" }`,
      ],
    })
    const done = await service.wait(key, run.id, 30_000)
    assert.equal(done.result?.status, 'ok', done.result?.violation?.message)
    assert.equal(service.result(key, done.id)?.stdout, 'a'.repeat(pairs))
    assert.equal(service.result(key, done.id)?.stderr, 'b'.repeat(pairs))
    const output: RunEvent[] = []
    for (let seq = 0; ; ) {
      const page = service.events(key, run.id, seq, () => {})
      page.stop()
      output.push(...page.past.filter((e) => e.type === 'output'))
      if (!page.more) break
      seq = page.past.at(-1)?.seq ?? seq
    }
    const ms = Date.parse(done.finishedAt ?? '') - Date.parse(done.startedAt ?? '')
    assert.ok(output.length <= (ms / 25 + 2) * 6, `${output.length} output events in ${ms} ms`)
    // Each stream's bytes are exact; both together hold every byte once.
    assert.equal(service.output(key, run.id, 'stdout', 0, 1e6).toString(), 'a'.repeat(pairs))
    assert.equal(service.output(key, run.id, 'stderr', 0, 1e6).toString(), 'b'.repeat(pairs))
    const merged = service.output(key, run.id, 'output', 0, 1e6).toString()
    assert.equal([...merged].sort().join(''), 'a'.repeat(pairs) + 'b'.repeat(pairs))
  })

  it("injects a key's secrets and redacts them from the result and events", async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user({ secrets: { API_TOKEN: 'tok-5ecret-value' } })
    const run = service.submit(key, { cmd: ['sh', '-c', 'echo "t=$API_TOKEN"; echo "$API_TOKEN" >&2'] })
    const done = await service.wait(key, run.id, 10_000)
    assert.equal(service.result(key, done.id)?.stdout, 't=[REDACTED]\n')
    const events = service.events(key, run.id, 0, () => {})
    const all = JSON.stringify({ done, events: events.past })
    events.stop()
    assert.ok(!all.includes('tok-5ecret-value'))
    const decoded = events.past
      .filter((e) => e.type === 'output')
      .map((e) => Buffer.from(String(e.data.data), 'base64').toString())
      .join('')
    assert.ok(!decoded.includes('tok-5ecret-value') && decoded.includes('[REDACTED]'))
    assert.ok(
      !JSON.stringify(service.store.runRequest(done.id)).includes('tok-5ecret'),
      'the stored request holds no secret',
    )
  })

  it("redacts a key's secrets from the files a run wrote and the service collected", async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user({ secrets: { API_TOKEN: 'tok-5ecret-value' } })
    const run = service.submit(key, {
      cmd: ['sh', '-c', 'echo "t=$API_TOKEN" > out.txt'],
      collect: ['out.txt'],
    })
    const done = await service.wait(key, run.id, 10_000)
    assert.equal(done.result?.status, 'ok', done.result?.violation?.message)
    assert.equal(service.file(key, run.id, 'out.txt').toString(), 't=[REDACTED]\n')
  })

  // A file's name is the program's output too: `touch "$API_TOKEN.txt"` put the secret in the listing,
  // in the path a client asks for, and in the request line the server logs.
  it("redacts a key's secrets from the names of collected files and their directories", async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user({ secrets: { API_TOKEN: 'tok-5ecret-value' } })
    const run = service.submit(key, {
      cmd: [
        'sh',
        '-c',
        'mkdir "d-$API_TOKEN" && echo a > "d-$API_TOKEN/x.txt" && echo b > "$API_TOKEN.txt" && echo c > "[REDACTED].txt" && echo d > plain.txt',
      ],
      collect: ['**/*.txt'],
    })
    const done = await service.wait(key, run.id, 10_000)
    assert.equal(done.result?.status, 'ok', done.result?.violation?.message)
    const files = service.files(key, run.id)
    assert.ok(!JSON.stringify(files).includes('tok-5ecret'), JSON.stringify(files))
    // Two names that redact alike: one is kept, and the rest of the collection goes on.
    assert.deepEqual(files, ['[REDACTED].txt', 'd-[REDACTED]/x.txt', 'plain.txt'])
    assert.equal(service.file(key, run.id, 'd-[REDACTED]/x.txt').toString(), 'a\n')
    assert.equal(service.file(key, run.id, 'plain.txt').toString(), 'd\n')
  })

  // `redact` covers everything a run returns, prints or keeps (policy.md): the output was redacted by the
  // library, the collected files only of the key's secrets.
  it("redacts the request's own `redact` strings from collected files, as from the output", async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const run = service.submit(key, {
      cmd: ['sh', '-c', 'echo "pw=hunter42"; echo "pw=hunter42" > out.txt; echo x > hunter42.txt'],
      collect: ['*.txt'],
      options: { redact: ['hunter42'] },
    })
    const done = await service.wait(key, run.id, 10_000)
    assert.equal(service.result(key, done.id)?.stdout, 'pw=[REDACTED]\n')
    assert.deepEqual(service.files(key, run.id), ['[REDACTED].txt', 'out.txt'])
    assert.equal(service.file(key, run.id, 'out.txt').toString(), 'pw=[REDACTED]\n')
  })

  it('a key sees only its own runs; scopes are checked; admins see all', async () => {
    const { service, user, admin } = await setup()
    closers.push(() => service.close())
    const a = user().key
    const bUser = user()
    const b = bUser.key
    const reader = user({ scopes: ['runs:read'] }).key
    const run = service.submit(a, { cmd: ['true'] })
    await service.wait(a, run.id, 10_000)
    rejects(() => service.get(b, run.id), 'not-found')
    rejects(() => service.cancel(b, run.id), 'not-found')
    rejects(() => service.remove(b, run.id), 'not-found')
    rejects(() => service.events(b, run.id, 0, () => {}), 'not-found')
    assert.deepEqual(service.list(b, { limit: 10 }).runs, [])
    assert.deepEqual(
      service.list(a, { limit: 10 }).runs.map((r) => r.id),
      [run.id],
    )
    assert.equal(service.get(admin, run.id).id, run.id)
    assert.equal(service.list(admin, { limit: 10 }).runs.length, 1)
    rejects(() => service.submit(reader, { cmd: ['true'] }), 'forbidden')
    rejects(() => service.createKey(a, { name: 'x' }), 'forbidden')
    rejects(() => service.listKeys(a), 'forbidden')
    service.revokeKey(admin, b.id)
    assert.equal(service.authenticate(bUser.token), null)
    service.remove(a, run.id)
    rejects(() => service.get(a, run.id), 'not-found')
  })

  it("revoking a key stops its runs at once, running and queued, and no other key's", async () => {
    // A revoked key is one that must do nothing more: its running runs went on to their wall time (a
    // compromised key's miner, or its exfiltration), its queued ones held their places.
    const { service, admin, user } = await setup({ concurrency: 2 })
    closers.push(() => service.close())
    const a = user().key
    const b = user().key
    const running = service.submit(a, { cmd: ['sleep', '30'] })
    const other = service.submit(b, { cmd: ['sleep', '1'] })
    const queued = service.submit(a, { cmd: ['true'] })
    for (let i = 0; i < 100 && service.get(a, running.id).state !== 'running'; i++)
      await new Promise((r) => setTimeout(r, 20))
    const started = Date.now()
    service.revokeKey(admin, a.id)
    const ended = await service.wait(admin, running.id, 10_000)
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
    assert.equal(ended.state, 'finished')
    assert.equal(ended.result?.status, 'canceled')
    const q = await service.wait(admin, queued.id, 5000)
    assert.equal(q.state, 'finished')
    assert.equal(q.result?.status, 'canceled')
    const o = await service.wait(admin, other.id, 10_000)
    assert.equal(o.result?.status, 'ok', 'another key’s run goes on')
  })

  it('stops the runs of a key revoked on the data dir by another process, within a sweep', async () => {
    // `cordon keys revoke` writes the store only; the server learns of it when it next looks.
    const { service, dataDir, admin, user } = await setup({ sweepIntervalMs: 100 })
    closers.push(() => service.close())
    const a = user().key
    const running = service.submit(a, { cmd: ['sleep', '30'] })
    for (let i = 0; i < 100 && service.get(a, running.id).state !== 'running'; i++)
      await new Promise((r) => setTimeout(r, 20))
    const other = new SqliteStore(dataDir)
    other.revokeKey(a.id, new Date().toISOString())
    other.close()
    const started = Date.now()
    const ended = await service.wait(admin, running.id, 10_000)
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
    assert.equal(ended.result?.status, 'canceled')
  })

  it('refuses server-only options and invalid fields, naming them', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    rejects(
      () => service.submit(key, { cmd: ['true'], options: { cwd: '/' } }),
      'forbidden-option',
      'options.cwd',
    )
    rejects(
      () => service.submit(key, { cmd: ['true'], options: { writable: ['/'] } }),
      'forbidden-option',
      'options.writable',
    )
    rejects(() => service.submit(key, { cmd: [] }), 'invalid', 'cmd')
    rejects(
      () => service.submit(key, { cmd: ['true'], options: { limits: { memoryBytes: 'lots' } } }),
      'invalid',
      'options.limits.memoryBytes',
    )
    rejects(
      () => service.submit(key, { cmd: ['true'], files: [{ path: '../x', content: '' }] }),
      'invalid',
      'files.0.path',
    )
    rejects(() => service.submit(key, null), 'invalid')
    // A webhook to the host itself or a private range is refused when the run is submitted.
    for (const url of [
      'http://127.0.0.1:7070/hook',
      'http://0x7f000001/',
      'http://169.254.169.254/',
      'http://localhost/',
    ])
      rejects(() => service.submit(key, { cmd: ['true'], webhook: { url } }), 'invalid', 'webhook.url')
    assert.deepEqual(service.list(key, { limit: 10 }).runs, [], 'nothing stored')
  })

  it('cancels a running run (canceled) and a queued one (never started)', async () => {
    const { service, user } = await setup({ concurrency: 1 })
    closers.push(() => service.close())
    const { key } = user()
    const long = service.submit(key, { cmd: ['sh', '-c', 'echo up; sleep 30'] })
    const queued = service.submit(key, { cmd: ['sh', '-c', 'echo never'] })
    await new Promise<void>((resolve) => {
      const sub = service.events(key, long.id, 0, (e) => {
        if (e.type === 'output') {
          sub.stop()
          resolve()
        }
      })
    })
    assert.equal(service.cancel(key, queued.id).state, 'finished')
    const q = service.get(key, queued.id)
    assert.equal(q.result?.status, 'canceled')
    assert.equal(q.startedAt, null)
    service.cancel(key, long.id)
    const done = await service.wait(key, long.id, 10_000)
    assert.equal(done.result?.status, 'canceled')
    assert.equal(service.result(key, done.id)?.stdout, 'up\n')
    rejects(() => service.writeStdin(key, long.id, Buffer.from('x')), 'conflict')
  })

  it('an open stdin takes writes and its end; files are written and collected', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const run = service.submit(key, {
      cmd: ['sh', '-c', 'cat > got.txt; cat in.txt got.txt'],
      stdin: 'open',
      files: [{ path: 'in.txt', content: 'file\n' }],
      collect: ['*.txt'],
    })
    service.writeStdin(key, run.id, Buffer.from('one\n'))
    service.writeStdin(key, run.id, Buffer.from('two\n'))
    service.closeStdin(key, run.id)
    const done = await service.wait(key, run.id, 10_000)
    assert.equal(service.result(key, done.id)?.stdout, 'file\none\ntwo\n')
    assert.deepEqual(service.files(key, run.id), ['got.txt', 'in.txt'])
    assert.equal(service.file(key, run.id, 'got.txt').toString(), 'one\ntwo\n')
    rejects(() => service.file(key, run.id, '../../cordon.db'), 'not-found')
  })

  it('holds a bounded amount of stdin a program does not read: past it, writes are refused', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const run = service.submit(key, { cmd: ['sleep', '30'], stdin: 'open' })
    const chunk = Buffer.alloc(256 * 1024)
    let refused: unknown = null
    for (let i = 0; i < 64 && refused === null; i++) {
      try {
        service.writeStdin(key, run.id, chunk)
      } catch (error) {
        refused = error
      }
    }
    assert.ok(refused instanceof ServiceError, 'refused before 16 MiB were held')
    assert.equal(refused.code, 'quota')
    assert.ok((refused.retryAfterS ?? 0) >= 1)
    service.cancel(key, run.id)
    assert.equal((await service.wait(key, run.id, 10_000)).result?.status, 'canceled')
  })

  it('holds the stdin bound per run, the write itself counted, and per key', async () => {
    // One write of any size (up to the body limit, 8 MiB) was taken while less than the bound was held:
    // each queued run held 8 MiB, and 30 of them 267 MiB more of the server's memory (no bound per key).
    const MiB = 1024 * 1024
    const { service, user } = await setup({
      concurrency: 1,
      maxStdinBuffered: MiB,
      maxStdinBufferedPerKey: 2.5 * MiB,
    })
    closers.push(() => service.close())
    const { key } = user()
    // The one slot is taken: the runs with stdin wait in the queue.
    const blocker = service.submit(key, { cmd: ['sleep', '30'] })
    const runs = [0, 1, 2].map(() => service.submit(key, { cmd: ['wc', '-c'], stdin: 'open' }).id) as [
      string,
      string,
      string,
    ]
    rejects(() => service.writeStdin(key, runs[0], Buffer.alloc(MiB + 1)), 'too-large')
    service.writeStdin(key, runs[0], Buffer.alloc(768 * 1024))
    rejects(() => service.writeStdin(key, runs[0], Buffer.alloc(512 * 1024)), 'quota')
    service.writeStdin(key, runs[0], Buffer.alloc(256 * 1024))
    service.writeStdin(key, runs[1], Buffer.alloc(MiB))
    // The key holds 2 MiB: 1 MiB more would pass its 2.5.
    rejects(() => service.writeStdin(key, runs[2], Buffer.alloc(MiB)), 'quota')
    service.writeStdin(key, runs[2], Buffer.alloc(512 * 1024))
    // Another key has its own.
    const other = user().key
    const theirs = service.submit(other, { cmd: ['cat'], stdin: 'open' })
    service.writeStdin(other, theirs.id, Buffer.alloc(MiB))
    // What a run reads is no longer held: a started run's stdin read to its end frees the key's share.
    service.closeStdin(key, runs[0])
    service.cancel(key, blocker.id)
    const done = await service.wait(key, runs[0], 20_000)
    assert.equal(done.result?.status, 'ok')
    assert.equal(service.result(key, done.id)?.stdout.trim(), String(MiB))
    service.writeStdin(key, runs[2], Buffer.alloc(512 * 1024))
    for (const id of [runs[1], runs[2]]) service.cancel(key, id)
    service.cancel(other, theirs.id)
  })

  it('wait returns the run as it is after its timeout', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const run = service.submit(key, { cmd: ['sleep', '5'] })
    const early = await service.wait(key, run.id, 200)
    assert.notEqual(early.state, 'finished')
    service.cancel(key, run.id)
    assert.equal((await service.wait(key, run.id, 10_000)).result?.status, 'canceled')
  })

  it('applies queue-full and quota to submits', async () => {
    const { service, user } = await setup({ concurrency: 1, maxQueued: 1 })
    closers.push(() => service.close())
    const limited = user({ quota: { concurrentRuns: 1 } }).key
    const other = user().key
    const first = service.submit(limited, { cmd: ['sleep', '5'] })
    rejects(() => service.submit(limited, { cmd: ['true'] }), 'quota')
    const second = service.submit(other, { cmd: ['true'] })
    rejects(() => service.submit(other, { cmd: ['true'] }), 'queue-full')
    service.cancel(limited, first.id)
    assert.equal((await service.wait(other, second.id, 10_000)).result?.status, 'ok')
  })

  it('drain: not ready, refuses submits, lets running runs finish', async () => {
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    const run = service.submit(key, { cmd: ['sh', '-c', 'sleep 0.3; echo finished'] })
    assert.equal(service.ready(), true)
    const drained = service.drain()
    assert.equal(service.ready(), false)
    assert.throws(
      () => service.submit(key, { cmd: ['true'] }),
      (e: unknown) => e instanceof ServiceError && e.code === 'draining' && e.retryAfterS !== undefined,
    )
    await drained
    const done = service.get(key, run.id)
    assert.equal(service.result(key, done.id)?.stdout, 'finished\n')
  })

  it("sweeps finished runs past their key's retention, with their collected files", async () => {
    const dataDir = path.join(tempDir('cordon-svc-'), 'data')
    const made = await createService({ dataDir, sweepIntervalMs: 50 })
    const { service } = made
    closers.push(() => service.close())
    const admin = service.authenticate(made.adminKey as string) as KeyRecord
    const key = service.authenticate(
      service.createKey(admin, {
        name: 'brief',
        scopes: ['runs:write', 'runs:read'],
        ceilings: {},
        retention: 100,
      }).key,
    ) as KeyRecord
    const run = service.submit(key, { cmd: ['sh', '-c', 'echo x > kept.txt'], collect: ['kept.txt'] })
    await service.wait(key, run.id, 10_000)
    assert.deepEqual(service.files(key, run.id), ['kept.txt'])
    const filesDir = path.join(dataDir, 'files', run.id)
    assert.ok(existsSync(filesDir))
    await new Promise((r) => setTimeout(r, 400))
    rejects(() => service.get(key, run.id), 'not-found')
    assert.equal(existsSync(filesDir), false)
  })

  it('after a crash: a running run ends interrupted, a queued one runs, finished ones are intact', async () => {
    const { dataDir, service, user } = await setup()
    const { token, key } = user()
    await service.close()
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./service-child.ts', import.meta.url)), dataDir, token],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    const ids = await new Promise<{ done: string; long: string; queued: string }>((resolve, reject) => {
      let buf = ''
      child.stdout.on('data', (d: Buffer) => {
        buf += d
        if (buf.includes('\n')) resolve(JSON.parse(buf))
      })
      child.once('exit', (code) => reject(new Error(`child exited ${code}`)))
    })
    child.kill('SIGKILL')
    await new Promise((r) => child.once('exit', r))

    const again = await createService({ dataDir, concurrency: 1 })
    closers.push(() => again.service.close())
    const svc = again.service
    const long = svc.get(key, ids.long)
    assert.equal(long.state, 'finished')
    assert.equal(long.result?.status, 'error')
    assert.equal(long.result?.violation?.limit, 'interrupted')
    const longEvents = svc.events(key, ids.long, 0, () => {}).past
    assert.deepEqual(
      longEvents.map((e) => e.seq),
      longEvents.map((_, i) => i + 1),
    )
    assert.deepEqual(
      longEvents.slice(-2).map((e) => e.type),
      ['interrupted', 'end'],
    )
    const queued = await svc.wait(key, ids.queued, 10_000)
    assert.equal(queued.result?.status, 'ok')
    assert.equal(svc.result(key, queued.id)?.stdout, 'later\n')
    const done = svc.get(key, ids.done)
    assert.equal(svc.result(key, done.id)?.stdout, 'done\n')
  })
})

describe('webhooks', { skip }, () => {
  it("delivers the finished run, signed with the key's secret, retrying a 5xx, each attempt recorded", async () => {
    const got: { body: string; signature: string }[] = []
    const server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (c) => {
        body += c
      })
      req.on('end', () => {
        got.push({ body, signature: String(req.headers[SIGNATURE_HEADER.toLowerCase()]) })
        res.statusCode = got.length === 1 ? 500 : 204
        res.end()
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    const { service, user } = await setup({ allowPrivateWebhooks: true, webhookBackoff: () => 20 })
    const { key } = user()
    const submitted = service.submit(key, {
      cmd: ['echo', 'hooked'],
      webhook: { url: `http://127.0.0.1:${port}/hook` },
    })
    const run = await service.wait(key, submitted.id, 20_000)
    assert.equal(run.state, 'finished')
    const attempts = () => service.store.webhookAttempts(run.id)
    for (let i = 0; i < 100 && attempts().length < 2; i++) await new Promise((r) => setTimeout(r, 50))
    assert.deepEqual(
      attempts().map((a) => [a.attempt, a.status]),
      [
        [1, 500],
        [2, 204],
      ],
    )
    assert.equal(got.length, 2, 'a 500, then the retry')
    for (const { body, signature } of got)
      assert.ok(verifyWebhook(key.webhookSecret, body, signature), signature)
    const stored = service.store.getRun(run.id)
    assert.deepEqual(JSON.parse(got[1]!.body), JSON.parse(JSON.stringify(runView(stored!))))
    await service.close()
    server.close()
  })

  it('stops delivering a run that was deleted, and keeps no attempt of it', async () => {
    // A receiver that always fails: retries would go on after the run is gone, each attempt stored
    // under an id no run has any more, which neither deletion nor retention would ever remove.
    let posts = 0
    const server = http.createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        posts++
        res.statusCode = 500
        res.end()
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    const { service, user } = await setup({ allowPrivateWebhooks: true, webhookBackoff: () => 150 })
    const { key } = user()
    const submitted = service.submit(key, { cmd: ['true'], webhook: { url: `http://127.0.0.1:${port}/` } })
    await service.wait(key, submitted.id, 20_000)
    for (let i = 0; i < 100 && posts < 1; i++) await new Promise((r) => setTimeout(r, 10))
    service.remove(key, submitted.id)
    const seen = posts
    await new Promise((r) => setTimeout(r, 1500))
    assert.ok(posts <= seen + 1, `${posts - seen} more POSTs of a deleted run`)
    assert.deepEqual(service.store.webhookAttempts(submitted.id), [])
    assert.ok(!service.store.pendingWebhooks().some((p) => p.runId === submitted.id))
    await service.close()
    server.close()
  })

  it("bounds a run's wall time by the server's ceiling (1 h by default), which the operator raises", async () => {
    // A key made without ceilings let a run ask for any wall time: a slot of the server held for days.
    const { service, user } = await setup()
    closers.push(() => service.close())
    const { key } = user()
    rejects(
      () => service.submit(key, { cmd: ['true'], options: { limits: { wallTimeMs: '2h' } } }),
      'over-ceiling',
      'options.limits.wallTimeMs',
    )
    const raised = await setup({
      limitCeilings: { ...DEFAULT_SERVER_LIMIT_CEILINGS, wallTimeMs: 3 * 3_600_000 },
    })
    closers.push(() => raised.service.close())
    const mine = raised.user().key
    const run = raised.service.submit(mine, {
      cmd: ['true'],
      options: { limits: { wallTimeMs: '2h' } },
    })
    assert.equal((await raised.service.wait(mine, run.id, 20_000)).result?.status, 'ok')
  })

  it('holds no webhook body between attempts, and sends the run’s summary, whatever its output', async () => {
    // The body (the run's view: its output three times) was built once and held across every retry,
    // for minutes: ~16 MB a run here, whatever the receiver's state. It is now the run's summary, made
    // from the store for each attempt: the whole view was up to ~200 MB (16 MiB of control characters,
    // escaped), one held for each delivery due at once.
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    let posts = 0
    const bodies: number[] = []
    const server = http.createServer((req, res) => {
      let bytes = 0
      req.on('data', (c: Buffer) => {
        bytes += c.length
      })
      req.on('end', () => {
        posts++
        bodies.push(bytes)
        res.statusCode = 500
        res.end()
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    const { service, user } = await setup({ allowPrivateWebhooks: true, webhookBackoff: () => 60_000 })
    const { key } = user()
    const ids: string[] = []
    for (let i = 0; i < 6; i++) {
      const run = service.submit(key, {
        cmd: ['sh', '-c', 'head -c 8000000 /dev/zero | tr "\\0" a'],
        options: { limits: { maxOutputBytes: '8M' } },
        webhook: { url: `http://127.0.0.1:${port}/` },
      })
      ids.push(run.id)
    }
    for (const id of ids) await service.wait(key, id, 60_000)
    for (let i = 0; i < 500 && posts < ids.length; i++) await new Promise((r) => setTimeout(r, 20))
    assert.equal(posts, ids.length, 'each run POSTed once, its retry a minute away')
    for (const b of bodies) assert.ok(b < 2048, `a body of ${b} bytes: the run's summary`)
    await new Promise((r) => setTimeout(r, 200))
    gc()
    const before = process.memoryUsage().heapUsed
    // Dropping the bodies the deliveries hold (if they do) is what would free them.
    await service.close()
    gc()
    const freed = (before - process.memoryUsage().heapUsed) / 2 ** 20
    assert.ok(freed < 40, `${freed.toFixed(0)} MiB held by 6 webhook deliveries waiting for their retry`)
    server.close()
  })
})
