// A store that cannot write (the data dir's disk full, SQLite's own page limit, a failing write) in the
// middle of a run: every started run still reaches `finished`, its sandbox killed before its workspace
// goes, and a full store answers 503, never 500. The store is real: its file's own limits
// (`PRAGMA max_page_count`), SQLite triggers that make one kind of write fail on the service's own
// connection, or a data dir on a tiny filesystem filled up.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { createApp } from '../../src/service/http/app.js'
import { createService, type ServiceLog } from '../../src/service/service.js'
import type { SqliteSyncStore as SqliteStore } from '../../src/service/sqlite-sync.js'
import type { KeyRecord } from '../../src/service/types.js'
import { marker, noNamespace, notRoot, processesWith, skipTier, TIERS, tempDir, waitFor } from '../helpers.js'

/** Each log line the service wrote: its level, its message and its object. */
function logCollector() {
  const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = []
  const at =
    (level: string) =>
    (obj: Record<string, unknown>, msg = '') =>
      lines.push({ level, msg, obj })
  const log: ServiceLog = { info: at('info'), warn: at('warn'), error: at('error') }
  return { log, lines }
}

async function setup(options: Partial<Parameters<typeof createService>[0]> = {}) {
  const dataDir = options.dataDir ?? path.join(tempDir('cordon-store-'), 'data')
  const { log, lines } = logCollector()
  const made = await createService({ dataDir, concurrency: 2, useSpawner: false, log, ...options })
  const { service } = made
  closers.push(() => service.close())
  const admin = service.authenticate(made.adminKey as string) as KeyRecord
  const { key: token } = service.createKey(admin, {
    name: 'user',
    scopes: ['runs:write', 'runs:read'],
    ceilings: { network: 'host' },
  })
  const key = service.authenticate(token) as KeyRecord
  const db = (service.store as SqliteStore).db
  return { dataDir, service, key, token, db, lines }
}

/** Makes every write of `what` on the service's own connection fail, as a failing disk would; returns the undo. */
function failWrites(db: import('better-sqlite3').Database, name: string, on: string): () => void {
  db.exec(`CREATE TEMP TRIGGER ${name} ${on} BEGIN SELECT RAISE(FAIL, 'disk I/O error (test)'); END`)
  return () => db.exec(`DROP TRIGGER IF EXISTS temp.${name}`)
}

/** The store takes no new page from now on (SQLITE_FULL), as on a full disk; returns the undo. */
function fillStore(db: import('better-sqlite3').Database): () => void {
  db.pragma('max_page_count = 1')
  return () => {
    db.pragma('max_page_count = 1073741823')
  }
}

const closers: (() => Promise<void>)[] = []
const strays: string[] = []
after(async () => {
  for (const c of closers) await c().catch(() => undefined)
  // What an old server left running (the bug these tests are about) goes with the test process.
  for (const m of strays) for (const pid of processesWith(m)) process.kill(pid, 'SIGKILL')
})

describe('a store that cannot write during a run', { skip: noNamespace }, () => {
  it('ends the run `error` naming the store, with its sandbox killed, when output cannot be stored', async () => {
    const { service, key, db, lines, dataDir } = await setup()
    const m = marker()
    strays.push(m)
    const run = service.submit(key, {
      cmd: ['sh', '-c', `sleep ${m} & echo go; while :; do head -c 100000 /dev/zero | tr '\\0' x; done`],
      options: { limits: { wallTimeMs: '60s' } },
    })
    assert.ok(
      await waitFor(() => service.store.events(run.id, 0, 10).some((e) => e.type === 'started'), 20_000),
    )
    const undo = fillStore(db)
    try {
      assert.ok(
        await waitFor(() => processesWith(m).length === 0, 20_000),
        'the sandbox is killed once its events cannot be stored',
      )
    } finally {
      undo()
    }
    const done = await service.wait(key, run.id, 20_000)
    assert.equal(done.state, 'finished')
    assert.equal(done.result?.status, 'error')
    assert.equal(done.result?.violation?.limit, 'store')
    assert.match(done.result?.violation?.message ?? '', /could not be stored.*(full|SQLITE_FULL)/)
    assert.ok(
      lines.some((l) => l.level === 'error' && l.obj.runId === run.id),
      JSON.stringify(lines),
    )
    assert.deepEqual(
      readdirSync(path.join(dataDir, 'work')).filter((n) => n.includes(run.id)),
      [],
    )
  })

  it('ends the run when even its `started` event cannot be stored', async () => {
    const { service, key, db } = await setup()
    const m = marker()
    strays.push(m)
    const undo = failWrites(db, 'no_started', "BEFORE INSERT ON main.events WHEN NEW.type = 'started'")
    const run = service.submit(key, { cmd: ['sleep', m], options: { limits: { wallTimeMs: '60s' } } })
    const done = await service.wait(key, run.id, 20_000)
    undo()
    assert.equal(done.state, 'finished')
    assert.equal(done.result?.violation?.limit, 'store', JSON.stringify(done.result?.violation))
    assert.match(done.result?.violation?.message ?? '', /disk I\/O error/)
    assert.ok(
      await waitFor(() => processesWith(m).length === 0, 10_000),
      'no process of the sandbox survives',
    )
  })

  it('runs a submitted run whose `queued` event alone could not be stored', async () => {
    const { service, key, db, lines } = await setup()
    const undo = failWrites(db, 'no_queued', "BEFORE INSERT ON main.events WHEN NEW.type = 'queued'")
    const run = service.submit(key, { cmd: ['sh', '-c', 'echo ran'] })
    undo()
    const done = await service.wait(key, run.id, 20_000)
    assert.equal(service.result(key, run.id)?.stdout, 'ran\n', JSON.stringify(done.result?.violation))
    assert.ok(lines.some((l) => l.obj.runId === run.id && /queued/.test(l.msg)))
  })

  it('ends the run `error` when its connections, stored after it, cannot be', async () => {
    const { service, key, db } = await setup()
    const undo = failWrites(db, 'no_network', "BEFORE INSERT ON main.events WHEN NEW.type = 'network'")
    const run = service.submit(key, {
      cmd: ['sh', '-c', 'curl -s -m 5 http://denied.example/ >/dev/null 2>&1; echo tried'],
      options: { network: { allow: ['allowed.example'] }, limits: { wallTimeMs: '30s' } },
    })
    const done = await service.wait(key, run.id, 30_000)
    undo()
    assert.equal(done.result?.violation?.limit, 'store', JSON.stringify(done.result))
  })

  it('holds a finish the store cannot take, logs it, and stores it once the store recovers', async () => {
    const { service, key, db, lines } = await setup()
    const undo = failWrites(
      db,
      'no_finish',
      "BEFORE UPDATE OF state ON main.runs WHEN NEW.state = 'finished'",
    )
    const run = service.submit(key, { cmd: ['sh', '-c', 'echo done'] })
    assert.ok(
      await waitFor(() => lines.some((l) => l.obj.runId === run.id && /finish/.test(l.msg)), 20_000),
      `the failed finish is logged: ${JSON.stringify(lines)}`,
    )
    assert.equal(service.get(key, run.id).state, 'running', 'the store says what it holds')
    const waiting = service.wait(key, run.id, 30_000)
    undo()
    const done = await waiting
    assert.equal(done.state, 'finished', 'stored once the store takes it again')
    assert.equal(done.result?.status, 'ok', done.result?.violation?.message)
    assert.equal(service.result(key, done.id)?.stdout, 'done\n')
    assert.equal(service.store.events(run.id, 0, 100).at(-1)?.type, 'end')
  })

  it('starts a run the store could not mark running once it can, and keeps serving meanwhile', async () => {
    const { service, key, db } = await setup()
    const undo = failWrites(db, 'no_start', "BEFORE UPDATE OF state ON main.runs WHEN NEW.state = 'running'")
    const run = service.submit(key, { cmd: ['sh', '-c', 'echo late'] })
    await new Promise((r) => setTimeout(r, 300))
    assert.equal(service.get(key, run.id).state, 'queued')
    undo()
    const done = await service.wait(key, run.id, 20_000)
    assert.equal(service.result(key, done.id)?.stdout, 'late\n', JSON.stringify(done.result?.violation))
  })

  it('survives a webhook attempt the store cannot record', async () => {
    const hits: string[] = []
    const hook = http.createServer((req, res) => {
      hits.push(req.url ?? '')
      res.writeHead(200).end()
    })
    hook.listen(0, '127.0.0.1')
    await new Promise((r) => hook.once('listening', r))
    after(() => hook.close())
    const { service, key, db, lines } = await setup({ allowPrivateWebhooks: true })
    const undo = failWrites(db, 'no_attempt', 'BEFORE INSERT ON main.webhook_attempts')
    const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`
    const run = service.submit(key, { cmd: ['true'], webhook: { url } })
    await service.wait(key, run.id, 20_000)
    assert.ok(await waitFor(() => hits.length > 0, 10_000), 'delivered')
    assert.ok(
      await waitFor(() => lines.some((l) => l.obj.runId === run.id && /webhook/.test(l.msg)), 5000),
      JSON.stringify(lines),
    )
    undo()
    // The process is alive (an unhandled rejection would have ended it) and still runs runs.
    const next = service.submit(key, { cmd: ['sh', '-c', 'echo alive'] })
    await service.wait(key, next.id, 20_000)
    assert.equal(service.result(key, next.id)?.stdout, 'alive\n')
  })

  it('a submit the store cannot take is 503 with Retry-After, never 500', async () => {
    const { service, token, db } = await setup()
    const { app } = createApp(service, {})
    const undo = fillStore(db)
    try {
      const big = 'x'.repeat(200_000)
      const res = await app.request('/v1/runs', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ cmd: ['true'], files: [{ path: 'pad', content: big }] }),
      })
      assert.equal(res.status, 503, await res.clone().text())
      assert.ok(Number(res.headers.get('retry-after')) >= 1)
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'store-full')
    } finally {
      undo()
    }
  })
})

describe('a data dir on a full filesystem (as root: a small tmpfs)', { skip: notRoot || noNamespace }, () => {
  it('answers 503 with Retry-After to a submit, and serves again once there is room', async () => {
    const mnt = tempDir('cordon-small-')
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'cordon-test', mnt])
    assert.equal(mounted.status, 0, String(mounted.stderr))
    after(() => {
      spawnSync('umount', ['-l', mnt])
    })
    const { service, token } = await setup({ dataDir: path.join(mnt, 'data') })
    const { app } = createApp(service, {})
    const post = () =>
      app.request('/v1/runs', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ cmd: ['true'], files: [{ path: 'pad', content: 'x'.repeat(60_000) }] }),
      })
    // Fill what is left, as another tenant's run or another program would.
    const filler = path.join(mnt, 'filler')
    spawnSync('sh', ['-c', `dd if=/dev/zero of=${filler} bs=64k 2>/dev/null; true`])
    let res = await post()
    for (let i = 0; i < 50 && res.status === 201; i++) res = await post()
    assert.equal(res.status, 503, await res.clone().text())
    assert.ok(Number(res.headers.get('retry-after')) >= 1)
    writeFileSync(filler, '')
    res = await post()
    assert.equal(res.status, 201, await res.text())
  })
})

// Root removed a run's workspace by a path walk while the sandbox, never killed after a store error,
// swapped a directory of it for a symlink to a host directory: root then deleted what the link named.
describe('root deletes nothing of the host after a store error', { skip: notRoot }, () => {
  for (const tier of TIERS) {
    it(`a sandbox swapping links in its workspace while the store fails (${tier} tier)`, {
      skip: skipTier(tier),
    }, async () => {
      const host = tempDir('cordon-canary-', { mode: 0o700 })
      mkdirSync(path.join(host, 'inner'))
      writeFileSync(path.join(host, 'canary'), 'keep me\n')
      writeFileSync(path.join(host, 'inner', 'canary'), 'me too\n')
      const m = marker()
      strays.push(m)
      // Many directories make a path walk slow; each is swapped for a link to the host directory and back.
      const attack = `
import os, sys
host = sys.argv[1]
for i in range(300):
    os.makedirs('d%d/sub' % i, exist_ok=True)
    for j in range(10):
        open('d%d/sub/f%d' % (i, j), 'w').close()
        open('d%d/f%d' % (i, j), 'w').close()
print('ready', flush=True)
while True:
    for i in range(300):
        try:
            os.rename('d%d' % i, 't%d' % i)
            os.symlink(host, 'd%d' % i)
            os.unlink('d%d' % i)
            os.rename('t%d' % i, 'd%d' % i)
        except OSError:
            pass
`
      // Where nobody but root writes above the data dir, which the process tier needs of it.
      const { service, key, db } = await setup({
        dataDir: path.join(tempDir('cordon-store-', { parent: '/var/lib' }), 'data'),
      })
      const undo = failWrites(db, 'no_output', "BEFORE INSERT ON main.events WHEN NEW.type = 'output'")
      const run = service.submit(key, {
        cmd: ['python3', '-c', attack, host, m],
        options: { isolation: tier, limits: { wallTimeMs: '60s', maxOpenFiles: 64 } },
      })
      const done = await service.wait(key, run.id, 30_000)
      undo()
      assert.ok(existsSync(path.join(host, 'canary')), 'the host file is still there')
      assert.ok(existsSync(path.join(host, 'inner', 'canary')), 'and the one below it')
      assert.ok(
        await waitFor(() => processesWith(m).length === 0, 10_000),
        'no process of the sandbox survives',
      )
      assert.equal(done.state, 'finished')
      assert.equal(done.result?.violation?.limit, 'store', JSON.stringify(done.result?.violation))
    })
  }
})
