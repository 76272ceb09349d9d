// ARCHITECTURE.md's invariant "what is shared, what is per run": the library's one shared helper, the
// default spawner, holds no fd, environment or state of the host's or of any run after that run's end;
// everything a run uses (its uid, cgroup, pipes, TMPDIR) is its own and gone with it.
import assert from 'node:assert/strict'
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, readSync } from 'node:fs'
import { describe, it } from 'node:test'
import { defaultSpawner, run } from '../../src/index.js'
import { noLauncher, noNamespace, noSpawner, waitFor } from '../helpers.js'

/** What each fd of `pid` is (a readlink of /proc/<pid>/fd/N), by number. */
function fdsOf(pid: number): Map<number, string> {
  const out = new Map<number, string>()
  for (const n of readdirSync(`/proc/${pid}/fd`)) out.set(Number(n), readlinkSync(`/proc/${pid}/fd/${n}`))
  return out
}

/** Whether any writable mapping of `pid` holds `needle` (its heap, its stack): root, or the same uid. */
function memoryHolds(pid: number, needle: Buffer): boolean {
  const mem = openSync(`/proc/${pid}/mem`, 'r')
  try {
    for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
      const [range, perms] = line.split(' ')
      if (!range || !perms?.startsWith('rw')) continue
      const [start, end] = range.split('-').map((h) => Number.parseInt(h, 16)) as [number, number]
      const chunk = Buffer.alloc(end - start)
      try {
        readSync(mem, chunk, 0, chunk.length, start)
      } catch {
        continue // a guard page, or gone
      }
      if (chunk.includes(needle)) return true
    }
    return false
  } finally {
    closeSync(mem)
  }
}

describe('what the library shares between runs', { skip: noSpawner || noLauncher }, () => {
  it('the default spawner, after 100 runs, holds only its own pipes and none of the host environment', async () => {
    process.env.CORDON_TEST_SHARED_SECRET = 'do-not-share'
    await run(['true'], { isolation: 'process' })
    assert.equal(await waitFor(() => defaultSpawner() !== undefined, 5000), true)
    const pid = defaultSpawner()!.pid
    const before = fdsOf(pid)
    const tiers = noNamespace ? (['process'] as const) : (['process', 'namespace'] as const)
    const uids = new Set<string>()
    for (let i = 0; i < 100; i++) {
      const isolation = tiers[i % tiers.length]!
      const result = await run(['sh', '-c', 'id -u; echo out; echo err >&2'], { isolation, stdin: 'in' })
      assert.equal(result.status, 'ok', result.stderr)
      uids.add(result.stdout.split('\n')[0]!)
    }
    assert.equal(defaultSpawner()?.pid, pid, 'the same helper served every run')
    // Only its own: /dev/null, its pipes to the host, its signalfd; no run's pipe left, no file or directory.
    const after = fdsOf(pid)
    assert.deepEqual(
      [...after.entries()].sort(),
      [...before.entries()].sort(),
      'no fd of any run is left in it',
    )
    for (const [fd, target] of after) {
      assert.match(target, /^(pipe:|socket:|anon_inode:\[signalfd\]|\/dev\/null)/, `fd ${fd} is ${target}`)
    }
    const environ = readFileSync(`/proc/${pid}/environ`)
    assert.equal(environ.length, 0, `its environment is empty: ${environ.toString()}`)
    // Per run: as root each run had a uid of its own from the pool (not root's, not one uid for all).
    if (process.getuid?.() === 0) assert.ok(uids.size > 1 && !uids.has('0'), [...uids].join(' '))
  })

  it("keeps nothing of a finished run's environment in its memory", async () => {
    await run(['true'], { isolation: 'process' })
    assert.equal(await waitFor(() => defaultSpawner() !== undefined, 5000), true)
    const pid = defaultSpawner()!.pid
    const secret = `cordon-secret-${process.pid}-${Math.random().toString(36).slice(2)}`
    const result = await run(['true'], { isolation: 'process', env: { TOKEN: secret } })
    assert.equal(result.status, 'ok')
    assert.equal(defaultSpawner()?.pid, pid, 'that run went through it')
    assert.equal(memoryHolds(pid, Buffer.from(secret)), false, 'the request was wiped once handled')
  })
})
