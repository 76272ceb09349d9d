// A handle's kill() after its run has ended must do nothing: no signal to anyone (the sandbox's uid, pids
// and session may belong to another run or a stranger by then), and no timer left behind.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openSpawner, type Spawner, start } from '../../src/index.js'
import { asUnprivileged, noSpawner, notRoot, noUnprivileged, skipTier, TIERS, tempDir } from '../helpers.js'

const LIBRARY = fileURLToPath(new URL('../../dist/index.js', import.meta.url))

/** Every process.kill() made while `body` runs, by pid and signal. */
async function signalsDuring(body: () => Promise<void>): Promise<[number, string | number | undefined][]> {
  const sent: [number, string | number | undefined][] = []
  const real = process.kill
  process.kill = ((pid: number, sig?: string | number) => {
    sent.push([pid, sig])
    return real.call(process, pid, sig)
  }) as typeof process.kill
  try {
    await body()
  } finally {
    process.kill = real
  }
  return sent
}

for (const tier of TIERS) {
  for (const via of ['fork', 'spawner'] as const) {
    describe(`kill() after the run ended (${tier} tier, ${via})`, {
      skip: skipTier(tier) || notRoot || (via === 'spawner' && noSpawner),
    }, () => {
      let spawner: Spawner | undefined
      before(async () => {
        if (via === 'spawner') spawner = await openSpawner()
      })
      after(() => spawner?.close())

      it('signals nothing: the next run, which has the same uid, finishes untouched', async () => {
        // A pool of one uid (outside the default pool, which other cordon hosts here use): run B gets
        // exactly the uid run A had.
        const uidPool = { first: 61_980, count: 1, lockDir: tempDir('cordon-uids-') }
        const options = { isolation: tier, uidPool, ...(spawner ? { spawner } : {}) }
        const a = start(['true'], options)
        assert.equal((await a.result).status, 'ok')
        const b = start(['sh', '-c', 'sleep 2; echo done'], options)
        // B is running (its launcher has dropped to the uid, or soon will): A's late kill must not reach it.
        await new Promise((r) => setTimeout(r, 300))
        const sent = await signalsDuring(async () => {
          a.kill()
          await new Promise((r) => setTimeout(r, 500))
        })
        const rb = await b.result
        assert.equal(rb.status, 'ok', JSON.stringify(rb))
        assert.equal(rb.stdout, 'done\n')
        assert.deepEqual(sent, [], 'no signal at all after the run ended')
      })
    })
  }
}

describe('a host that calls kill() on a finished handle', () => {
  for (const tier of TIERS) {
    for (const via of ['fork', 'spawner'] as const) {
      it(`exits by itself: no timer is left running (${tier} tier, ${via})`, {
        skip: skipTier(tier) || (via === 'spawner' && noSpawner),
      }, async () => {
        const code = `import { openSpawner, start } from ${JSON.stringify(LIBRARY)}
const spawner = ${via === 'spawner' ? 'await openSpawner()' : 'undefined'}
const handle = start(['true'], { isolation: '${tier}', ...(spawner ? { spawner } : {}) })
const r = await handle.result
handle.kill()
handle.kill()
await spawner?.close()
process.stdout.write(r.status)`
        const host = spawn(process.execPath, ['--input-type=module', '-e', code], {
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        let out = ''
        let err = ''
        host.stdout.on('data', (b: Buffer) => (out += b))
        host.stderr.on('data', (b: Buffer) => (err += b))
        const timer = setTimeout(() => host.kill('SIGKILL'), 10_000)
        const [status, signal] = await new Promise<[number | null, string | null]>((resolve) =>
          host.on('close', (c, s) => resolve([c, s])),
        )
        clearTimeout(timer)
        assert.equal(signal, null, `the host was still running 10 s later (killed): ${err}`)
        assert.equal(status, 0, err)
        assert.equal(out, 'ok')
      })
    }
  }
})

// A late kill() must not reach a process that took one of the finished sandbox's pids. Reuse is forced in
// a PID namespace of the test's own (writing its ns_last_pid touches nothing outside it): the host there
// runs a sandbox, then starts a stranger on every pid the sandbox had, then calls kill().
const noUnshare =
  notRoot ||
  (spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0
    ? false
    : 'unshare --pid --mount-proc does not work here')
/** The namespace's init: runs the host and reaps every orphan (node as pid 1 would not), so their pids come free. */
const REAPER = `import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
while True:
    p, status = os.wait()
    if p == pid:
        sys.exit(os.waitstatus_to_exitcode(status))`
const REUSE_HOST = `import { start } from ${JSON.stringify(LIBRARY)}
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
const [tier, lockDir] = process.argv.slice(1)
const handle = start(['sh', '-c', 'sleep 0.5'], {
  isolation: tier,
  // No cgroup, and a uid and TMPDIR of this test's own: nothing here may sweep what other hosts made.
  cgroup: { mode: 'off' },
  uidPool: { first: 61_979, count: 1, lockDir },
  limits: { killGraceMs: 50 },
})
const parent = (pid) => {
  try {
    const stat = readFileSync('/proc/' + pid + '/stat', 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return 0
  }
}
const tree = new Set([handle.pid])
const look = () => {
  for (const name of readdirSync('/proc')) {
    const pid = Number(name)
    for (let p = pid; p > 1; p = parent(p)) if (p === handle.pid) tree.add(pid)
  }
}
const watching = setInterval(look, 5)
const r = await handle.result
clearInterval(watching)
// Orphans the namespace's init has yet to reap still hold their pids: wait until every one is free.
const taken = () => [...tree].filter((pid) => parent(pid) !== 0)
for (let i = 0; i < 200 && taken().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
const strangers = []
for (const pid of [...tree].sort((a, b) => a - b)) {
  writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1))
  const stranger = spawn('sleep', ['30'], { stdio: 'ignore' })
  if (stranger.pid === pid) strangers.push(stranger)
  else stranger.kill('SIGKILL')
}
handle.kill()
await new Promise((resolve) => setTimeout(resolve, 500))
const hit = strangers.filter((s) => s.exitCode !== null || s.signalCode !== null).map((s) => s.signalCode)
for (const s of strangers) s.kill('SIGKILL')
process.stdout.write(JSON.stringify({ status: r.status, pids: tree.size, strangers: strangers.length, hit, message: r.violation?.message }))
process.exit(0)`

describe('kill() after the run ended, its pids taken by strangers', () => {
  for (const tier of TIERS) {
    it(`signals none of them (${tier} tier)`, { skip: skipTier(tier) || noUnshare }, () => {
      const host = spawnSync(
        'unshare',
        [
          '--pid',
          '--fork',
          '--mount-proc',
          'python3',
          '-c',
          REAPER,
          process.execPath,
          '--input-type=module',
          '-e',
          REUSE_HOST,
          tier,
          tempDir('cordon-uids-'),
        ],
        {
          encoding: 'utf8',
          timeout: 30_000,
          env: { ...process.env, TMPDIR: tempDir('cordon-tmp-', { mode: 0o755 }) },
        },
      )
      assert.equal(host.status, 0, host.stderr)
      const out = JSON.parse(host.stdout) as {
        status: string
        pids: number
        strangers: number
        hit: string[]
      }
      assert.equal(out.status, 'ok', host.stdout)
      assert.ok(out.strangers >= 3 && out.strangers === out.pids, `took ${out.strangers} of ${out.pids} pids`)
      assert.deepEqual(out.hit, [], 'a stranger was signalled')
    })
  }
})

describe('an unprivileged host (no uid of its own: the session marks the sandbox)', {
  skip: noUnprivileged() || skipTier('process'),
}, () => {
  it('kill() on a finished handle does nothing and leaves no timer: the host exits by itself', async () => {
    const out = await asUnprivileged<string>(
      `const handle = start(['true'], { isolation: 'process', cgroup: { mode: 'off' } })
      const r = await handle.result
      handle.kill()
      return r.status`,
      10_000,
    )
    assert.equal(out, 'ok')
  })
})
