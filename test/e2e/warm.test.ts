// A sandbox's warm members (createSandbox({ warm })): each invariant of src/run/warm.ts, with real
// members. Every warm run here is checked to have been given a member (stats().warm.hits), so none passes
// on the cold path by accident.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  createSandbox,
  defaultSpawner,
  probeCapabilities,
  run,
  type Sandbox,
  type SandboxOptions,
} from '../../src/index.js'
import { marker, noNamespace, notRoot, processesWith, waitFor, worldWritableDir } from '../helpers.js'

const caps = probeCapabilities()
const LIBRARY = fileURLToPath(new URL('../../dist/index.js', import.meta.url))
const AWAITER = '/dev/.cordon-exec'

/** Field `n` (1-based, after the name) of /proc/<pid>/stat, or null when it is gone. */
function statField(pid: number, n: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3] ?? null
  } catch {
    return null
  }
}

/** Whether `pid` descends from this process (or its default spawner). */
function ours(pid: number): boolean {
  const roots = new Set([process.pid, defaultSpawner()?.pid])
  for (let at: number | null = pid, depth = 0; at && depth < 10; depth++) {
    const parent: number = Number(statField(at, 4))
    if (roots.has(parent)) return true
    at = parent || null
  }
  return false
}

/** The pids of this process's members waiting for a run (cordon-await). */
function waiting(): number[] {
  return processesWith(AWAITER).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(`${AWAITER}\0`) && ours(pid)
    } catch {
      return false
    }
  })
}

const boxes: Sandbox[] = []
after(() => Promise.all(boxes.map((b) => b.close())))

/** A warm sandbox with `members` members, once they are all ready. */
async function warmBox(members: number, options: SandboxOptions = {}): Promise<Sandbox> {
  const box = createSandbox({ isolation: 'namespace', warm: members, ...options })
  boxes.push(box)
  assert.equal(
    await waitFor(() => box.stats().warm?.ready === members, 15_000),
    true,
    JSON.stringify(box.stats()),
  )
  return box
}

const hits = (box: Sandbox) => box.stats().warm!.hits

describe('warm members', { skip: noNamespace }, () => {
  it('run the program and report as a cold run would, with the setup not charged', async () => {
    const box = await warmBox(1)
    const script = 'echo out; echo err >&2; ulimit -n; exit 3'
    const limits = { maxOpenFiles: 321 }
    const warm = await box.run(['sh', '-c', script], { limits })
    assert.equal(hits(box), 1)
    const cold = await run(['sh', '-c', script], { isolation: 'namespace', limits })
    for (const r of [warm, cold]) {
      assert.equal(r.status, 'nonzero-exit')
      assert.equal(r.exitCode, 3)
      assert.equal(r.stdout, 'out\n321\n')
      assert.equal(r.stderr, 'err\n')
    }
    // What the program is called and the clock it sees, as cold: argv[0] the name found (sh is a link
    // to dash here), libfaketime's variables reaching the program alone.
    const clock = caps.faketime ? { clock: { start: '2001-02-03T04:05:06Z' } } : {}
    const said = ['sh', '-c', 'echo $0; date -u +%Y; cat /proc/self/cmdline | tr "\\0" " "']
    await waitFor(() => box.stats().warm!.ready === 1, 10_000)
    const warmSaid = await box.run(said, clock)
    assert.equal(hits(box), 2)
    const coldSaid = await run(said, { isolation: 'namespace', ...clock })
    assert.equal(warmSaid.stdout, coldSaid.stdout)
    if (caps.faketime) assert.match(warmSaid.stdout, /\n2001\n/)
    // The member's own set-up (bwrap's mounts, the namespaces) is not the run's: at most what a cold run's is.
    await waitFor(() => box.stats().warm!.ready === 1, 10_000)
    const warmTrue = await box.run(['true'])
    const coldTrue = await run(['true'], { isolation: 'namespace' })
    assert.equal(hits(box), 3)
    if (coldTrue.cpuMs !== null) {
      assert.ok(warmTrue.cpuMs! <= coldTrue.cpuMs + 1, `cpuMs warm ${warmTrue.cpuMs} cold ${coldTrue.cpuMs}`)
      assert.ok(
        warmTrue.maxRssBytes! <= coldTrue.maxRssBytes! * 1.5,
        `${warmTrue.maxRssBytes} ${coldTrue.maxRssBytes}`,
      )
    }
  })

  it('a member runs one program, is gone with everything of it after, and leaves nothing to the next', async () => {
    const m = marker()
    const dir = worldWritableDir('cordon-warm-')
    const shaped = await warmBox(2, { writable: [dir] })
    const leave = await shaped.run([
      'sh',
      '-c',
      `echo x > /tmp/left; echo y > /dev/shm/left; (setsid sleep ${m} &); id -u`,
    ])
    assert.equal(leave.status, 'ok', leave.stderr)
    assert.equal(hits(shaped), 1)
    assert.deepEqual(processesWith(m), [], 'its processes are gone when run() resolves')
    const [uid] = leave.stdout.split('\n')
    for (let i = 0; i < 10; i++) {
      await waitFor(() => shaped.stats().warm!.ready > 0, 10_000)
      const next = await shaped.run([
        'sh',
        '-c',
        'ls -A /dev/shm; ls -A /tmp | grep -v "^cordon-warm-"; id -u',
      ])
      assert.equal(next.status, 'ok')
      const lines = next.stdout.trim().split('\n')
      assert.deepEqual(lines.slice(0, -1), [], `nothing of an earlier run: ${next.stdout}`)
      if (!notRoot) assert.notEqual(lines.at(-1), uid, 'a uid of its own')
    }
    assert.equal(hits(shaped), 11)
  })

  it('waits with nothing of any run or of the host: an empty environment, only its own fds', async () => {
    process.env.CORDON_WARM_TEST_SECRET = 'not-for-members'
    const box = await warmBox(1)
    await box.run(['true'], { env: { RUN_SECRET: 'one-run-only' } })
    await waitFor(() => box.stats().warm!.ready === 1, 10_000)
    const idle = waiting()
    assert.ok(idle.length >= 1, 'a member waits')
    for (const pid of idle) {
      // Nothing but what bwrap sets itself, the directory it entered.
      assert.equal(readFileSync(`/proc/${pid}/environ`, 'utf8'), `PWD=${process.cwd()}\0`)
      const fds = readdirSync(`/proc/${pid}/fd`)
        .map(Number)
        .sort((a, b) => a - b)
      // stdio, the log channel, the activation record and the readiness pipe (closed once said).
      assert.deepEqual(
        fds.filter((fd) => fd !== 8),
        [0, 1, 2, 6, 7],
        `fds ${fds}`,
      )
      for (const fd of fds) {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`)
        assert.match(target, /^(pipe|socket):/, `fd ${fd}: ${target}, none of the host's files`)
      }
    }
    delete process.env.CORDON_WARM_TEST_SECRET
  })

  it('executes the program fresh at activation: never a forked image, and the member fds are closed', async () => {
    const box = await warmBox(2)
    const maps = async () => {
      await waitFor(() => box.stats().warm!.ready > 0, 10_000)
      const r = await box.run(['sh', '-c', 'head -1 /proc/self/maps; ls /proc/self/fd; readlink /proc/1/exe'])
      assert.equal(r.status, 'ok', r.stderr)
      return r.stdout.trim().split('\n')
    }
    const [a, b] = [await maps(), await maps()]
    assert.equal(hits(box), 2)
    assert.notEqual(a[0], b[0], 'each its own address space layout (ASLR)')
    // ls's own directory fd is 3; 7 and 8 (the member's) are closed before the program runs.
    assert.deepEqual(a.slice(1, -1), ['0', '1', '2', '3', '6'])
  })

  it('limits hold from the first instruction: memory, processes, wall time, cancel', async () => {
    const box = await warmBox(1, { limits: { memoryBytes: '64M', maxProcesses: 8, wallTimeMs: '3s' } })
    const hog = await box.run(['python3', '-c', 'x = bytearray(400 * 1024 * 1024)'])
    assert.equal(hits(box), 1)
    assert.equal(hog.status, 'memory', `${hog.status} ${hog.violation?.message}`)
    await waitFor(() => box.stats().warm!.ready === 1, 10_000)
    const forks = await box.run(['sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; wait'])
    assert.equal(hits(box), 2)
    assert.equal(forks.status, 'process-limit', `${forks.status} ${forks.violation?.message}`)
    await waitFor(() => box.stats().warm!.ready === 1, 10_000)
    const slow = await box.run(['sleep', '30'], { limits: { wallTimeMs: 300 } })
    assert.equal(hits(box), 3)
    assert.equal(slow.status, 'timeout')
    await waitFor(() => box.stats().warm!.ready === 1, 10_000)
    const handle = box.start(['sleep', '30'])
    setTimeout(() => handle.kill(), 200)
    assert.equal((await handle.result).status, 'canceled')
    assert.equal(hits(box), 4)
  })

  it('a run the shape does not cover, or a refused one, uses no member; a changed host makes them stale', async () => {
    const box = await warmBox(1)
    const other = await box.run(['true'], { limits: { tmpfsBytes: '8M' } })
    assert.equal(other.status, 'ok')
    const refused = await box.run(['no-such-program-anywhere'])
    assert.equal(refused.status, 'not-found')
    // Another HOME is another /etc/passwd, which the member wrote when it was made: its key differs.
    const home = await box.run(['sh', '-c', 'echo $HOME; grep ^sandbox: /etc/passwd | cut -d: -f6'], {
      env: { HOME: '/var/empty-home' },
    })
    assert.equal(home.stdout, '/var/empty-home\n/var/empty-home\n')
    assert.equal(hits(box), 0)
    assert.equal(box.stats().warm!.ready, 1, 'still ready, untouched')
    assert.ok(box.stats().warm!.misses >= 2, JSON.stringify(box.stats().warm))
    // A path bwrap looked up by name (the cwd) is another directory now: the member no longer fits.
    const base = worldWritableDir('cordon-warm-cwd-')
    const cwd = path.join(base, 'work')
    mkdirSync(cwd, { mode: 0o777 })
    const inCwd = await warmBox(1, { cwd })
    renameSync(cwd, path.join(base, 'old'))
    mkdirSync(cwd, { mode: 0o777 })
    writeFileSync(path.join(cwd, 'mark'), 'new')
    const r = await inCwd.run(['cat', 'mark'])
    assert.equal(r.stdout, 'new', 'a cold run in the directory the name names now')
    assert.equal(hits(inCwd), 0)
    assert.ok(inCwd.stats().warm!.recycled >= 1)
  })

  it('a program cannot reach the pool: no member fd, no other member, nothing survives', async () => {
    const box = await warmBox(2)
    const m = marker()
    const before = waiting()
    const r = await box.run([
      'sh',
      '-c',
      `echo hi >&7 2>/dev/null || echo no7; cat <&8 2>/dev/null || echo no8; ls /proc | grep -c '^[0-9]'; kill -9 -1 2>/dev/null; (setsid sleep ${m} &); echo done`,
    ])
    assert.equal(hits(box), 1)
    const lines = r.stdout.trim().split('\n')
    assert.deepEqual(lines.slice(0, 2), ['no7', 'no8'])
    assert.ok(Number(lines[2]) <= 5, `it sees only its own pid namespace: ${lines[2]}`)
    assert.deepEqual(processesWith(m), [])
    // The other member, ready meanwhile, was not touched.
    const still = before.filter((pid) => statField(pid, 3) !== null)
    assert.ok(still.length >= 1, 'the other member lives')
    const next = await box.run(['echo', 'fine'])
    assert.equal(next.stdout, 'fine\n')
    assert.equal(hits(box), 2)
  })

  it('members are bounded, recycled when idle, closed with the sandbox, and die with the host', async () => {
    assert.throws(() => createSandbox({ warm: 1000 }), /warm/)
    // The other tests' sandboxes first: from here every member waiting is this one's.
    await Promise.all(boxes.map((b) => b.close()))
    assert.deepEqual(waiting(), [])
    const box = await warmBox(2, { warm: { members: 2, idleMs: 300 } } as SandboxOptions)
    assert.equal(await waitFor(() => box.stats().warm!.recycled >= 2, 10_000), true)
    assert.equal(await waitFor(() => box.stats().warm!.ready === 2, 10_000), true)
    const mine = waiting()
    await box.close()
    assert.equal(await waitFor(() => mine.every((pid) => statField(pid, 3) === null), 5000), true)
    assert.equal((await box.run(['true'])).status, 'ok', 'a closed sandbox runs cold')
    // A host that ends takes its members with it (they are unreferenced: it ends on its own).
    const host = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { createSandbox } from ${JSON.stringify(LIBRARY)}
         import { readdirSync, readFileSync } from 'node:fs'
         const box = createSandbox({ isolation: 'namespace', warm: 2 })
         while (box.stats().warm.ready < 2) await new Promise((r) => setTimeout(r, 20))
         const members = readdirSync('/proc').filter((p) => {
           try { return readFileSync('/proc/' + p + '/cmdline', 'utf8').startsWith(${JSON.stringify(`${AWAITER}\0`)}) } catch { return false }
         })
         console.log(JSON.stringify(members.map(Number)))`,
      ],
      { encoding: 'utf8', timeout: 30_000 },
    )
    assert.equal(host.status, 0, host.stderr)
    const members: number[] = JSON.parse(host.stdout)
    assert.ok(members.length >= 2)
    const gone = await waitFor(() => members.every((pid) => statField(pid, 3) === null), 5000)
    assert.equal(gone, true, 'no member outlives its host')
  })
})
