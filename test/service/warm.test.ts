// `cordon serve --warm N` (src/service/warm.ts): served runs in warm members paired with workspaces, with
// the result a cold run gets, nothing of one run in the next, cancel as cold, and the cold path for a
// request of another shape.
import assert from 'node:assert/strict'
import { existsSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import type { RunResult } from '../../src/index.js'
import { createApp } from '../../src/service/http/app.js'
import { createService } from '../../src/service/service.js'
import type { KeyRecord, RunEvent } from '../../src/service/types.js'
import { marker, noNamespace, processesWith, tempDir, waitFor } from '../helpers.js'

type Service = Awaited<ReturnType<typeof createService>>['service']

const closers: (() => Promise<void>)[] = []
after(async () => {
  for (const c of closers.reverse()) await c()
})

async function setup(warm: number) {
  const dataDir = path.join(tempDir('cordon-warm-svc-'), 'data')
  const made = await createService({ dataDir, concurrency: 2, warm })
  const { service } = made
  const token = made.adminKey as string
  closers.push(() => service.close())
  const admin = service.authenticate(made.adminKey as string) as KeyRecord
  const user = (secrets: Record<string, string> = {}) => {
    const { key } = service.createKey(admin, {
      name: 'user',
      scopes: ['runs:write', 'runs:read'],
      ceilings: {},
      secrets,
    })
    return service.authenticate(key) as KeyRecord
  }
  return { dataDir, service, admin, user, token }
}

/** Until `n` members are ready (made in the background). */
async function ready(service: Service, n: number) {
  const ok = await waitFor(() => (service.warm?.stats().ready ?? 0) >= n, 30_000)
  assert.ok(ok, `members not ready: ${JSON.stringify(service.warm?.stats())}`)
}

/** Submits, waits, and says which path the run took (its `started` event). */
async function served(service: Service, key: KeyRecord, body: Record<string, unknown>) {
  const run = service.submit(key, body)
  const done = await service.wait(key, run.id, 30_000)
  assert.equal(done.state, 'finished')
  return {
    id: run.id,
    result: service.result(key, run.id) as RunResult,
    warm: startedWarm(service, key, run.id),
  }
}

function startedWarm(service: Service, key: KeyRecord, id: string): boolean | undefined {
  const sub = service.events(key, id, 0, () => {})
  sub.stop()
  const started = sub.past.find((e: RunEvent) => e.type === 'started')
  return (started?.data as { warm?: boolean } | undefined)?.warm
}

/** What a run's result says that a warm run must say as a cold one does. */
const outcome = (r: RunResult) => ({
  status: r.status,
  exitCode: r.exitCode,
  signal: r.signal,
  stdout: r.stdout,
  stderr: r.stderr,
  isolation: r.isolation,
  violation: r.violation && { kind: r.violation.kind, limit: r.violation.limit },
})

describe('cordon serve --warm', { skip: noNamespace }, () => {
  it('a served run takes a warm member and gets what a cold run gets: exit, output, timeout, memory', async () => {
    const warm = await setup(1)
    const cold = await setup(0)
    const cases: Record<string, unknown>[] = [
      {
        cmd: ['sh', '-c', 'cat in.txt; echo "v=$V"; echo err >&2; exit 3'],
        files: [{ path: 'in.txt', content: 'from the request\n' }],
        options: { env: { V: 'one' } },
      },
      { cmd: ['sleep', '30'], options: { limits: { wallTimeMs: '500ms' } } },
      {
        cmd: ['python3', '-c', 'x = bytearray(400 * 1024 * 1024)'],
        options: { limits: { memoryBytes: '128M' } },
      },
    ]
    for (const body of cases) {
      await ready(warm.service, 1)
      const w = await served(warm.service, warm.admin, body)
      const c = await served(cold.service, cold.admin, body)
      assert.equal(w.warm, true, `took the warm path: ${JSON.stringify(body.cmd)}`)
      assert.equal(c.warm, false)
      assert.deepEqual(outcome(w.result), outcome(c.result), JSON.stringify(body.cmd))
    }
    const stats = warm.service.warm?.stats()
    assert.equal(stats?.warmRuns, 3)
    assert.equal(stats?.coldRuns, 0)
    assert.equal(cold.service.warm, null, 'no members without --warm')
  })

  it('nothing of one warm run is in the next, of another key: files, env, processes', async () => {
    const { service, user } = await setup(2)
    const a = user({ SECRET_A: 'alpha-secret-value' })
    const b = user({ SECRET_B: 'beta-secret-value' })
    await ready(service, 2)
    const m = marker()
    const first = await served(service, a, {
      cmd: [
        'sh',
        '-c',
        `echo left > mine.txt; echo left > /tmp/mine.txt; echo "$SECRET_A" > sec.txt; setsid sleep ${m} >/dev/null 2>&1 & echo done`,
      ],
    })
    assert.equal(first.warm, true)
    assert.equal(first.result.status, 'ok', first.result.stderr)
    assert.equal(processesWith(m).length, 0, 'the first run took its processes with it')
    const second = await served(service, b, {
      cmd: [
        'sh',
        '-c',
        'ls -A; ls -A /tmp; env | grep -c SECRET_A; echo "b=$SECRET_B"; ps -eo args 2>/dev/null || ls /proc',
      ],
    })
    assert.equal(second.warm, true)
    const out = second.result.stdout
    assert.doesNotMatch(out, /mine\.txt|sec\.txt/, 'no file of the first run')
    assert.doesNotMatch(out, /alpha-secret/, "no env of the first run's key")
    assert.match(out, /^0$/m, 'SECRET_A is not set')
    assert.match(out, /^b=\[REDACTED\]$/m, 'its own key’s secret is there (redacted in output)')
    assert.doesNotMatch(out, new RegExp(m.replace('.', '\\.')), 'no process of the first run')
  })

  it('cancels a warm run as a cold one: status canceled, nothing left running', async () => {
    const { service, admin } = await setup(1)
    await ready(service, 1)
    const m = marker()
    const run = service.submit(admin, { cmd: ['sleep', m] })
    assert.ok(await waitFor(() => service.get(admin, run.id).state === 'running', 10_000))
    assert.ok(await waitFor(() => processesWith(m).length > 0, 10_000), 'the program runs')
    service.cancel(admin, run.id)
    const done = await service.wait(admin, run.id, 10_000)
    assert.equal(done.result?.status, 'canceled')
    assert.equal(startedWarm(service, admin, run.id), true)
    assert.ok(await waitFor(() => processesWith(m).length === 0, 5000), 'nothing of it left')
  })

  it('/metrics counts the runs by path, warm or cold', async () => {
    const { service, token } = await setup(1)
    const { app } = createApp(service)
    const auth = { authorization: `Bearer ${token}` }
    await ready(service, 1)
    for (const options of [{}, { mergeOutput: true }]) {
      const res = await app.request('/v1/runs', {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ cmd: ['true'], options, wait: '20s' }),
      })
      assert.equal(res.status, 201)
    }
    const metrics = await (await app.request('/metrics', { headers: auth })).text()
    assert.match(metrics, /cordon_runs_started_total\{path="warm"\} 1\b/)
    assert.match(metrics, /cordon_runs_started_total\{path="cold"\} 1\b/)
  })

  it('a request the members do not cover runs cold and leaves them ready; the workspaces go', async () => {
    const { service, admin, dataDir } = await setup(1)
    await ready(service, 1)
    for (const options of [
      { mergeOutput: true },
      { denySyscalls: ['ptrace'] },
      { limits: { tmpfsBytes: '8M' } },
    ]) {
      const r = await served(service, admin, { cmd: ['sh', '-c', 'echo ok'], options })
      assert.equal(r.warm, false, `${JSON.stringify(options)} ${JSON.stringify(r.result)}`)
      assert.equal(r.result.status, 'ok', `${JSON.stringify(options)}: ${r.result.stderr}`)
      assert.equal(r.result.stdout, 'ok\n')
    }
    assert.equal(service.warm?.stats().ready, 1, 'the member was not used up')
    const w = await served(service, admin, { cmd: ['sh', '-c', 'pwd'] })
    assert.equal(w.warm, true)
    const workspace = w.result.stdout.trim()
    assert.ok(workspace.startsWith(path.join(dataDir, 'work')), workspace)
    assert.ok(await waitFor(() => !existsSync(workspace), 5000), 'the warm run’s workspace is removed')
  })
})

describe('cordon serve --warm: bounds', () => {
  it('refuses a count past 64 or not whole, naming warm', async () => {
    for (const warm of [65, -1, 1.5]) {
      await assert.rejects(
        createService({ dataDir: path.join(tempDir('cordon-warm-bad-'), 'data'), warm }),
        (error: Error) => error.name === 'PolicyError' && /warm/.test(error.message),
      )
    }
  })

  it('keeps at most N members, and closing the server destroys them with their workspaces', {
    skip: noNamespace,
  }, async () => {
    const { service, dataDir } = await setup(2)
    await ready(service, 2)
    await new Promise((r) => setTimeout(r, 300))
    assert.equal(service.warm?.stats().ready, 2)
    const work = path.join(dataDir, 'work')
    const held = () =>
      readdirSync(work, { recursive: true, encoding: 'utf8' }).filter((p) => p.includes('warm-'))
    assert.equal(held().length, 2, 'a workspace per member')
    await service.close()
    assert.deepEqual(existsSync(work) ? held() : [], [])
  })
})
