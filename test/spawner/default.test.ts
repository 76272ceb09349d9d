// The default spawner: opened in the background at the first run that could use it, never waited for,
// shared by the runs of one process (one thread), replaced when it dies, closes or outlives the uid it was
// opened as, never keeping the host alive; `spawner: false` forks the host and opens none.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { defaultSpawner, run, start } from '../../src/index.js'
import { noLauncher, noSpawner, notRoot, waitFor } from '../helpers.js'

const LIBRARY = fileURLToPath(new URL('../../dist/index.js', import.meta.url))

/** Run `code` as a host process of its own (ESM, the built library imported as `cordon`); its output, parsed. */
function asHost(
  code: string,
  timeoutMs = 30_000,
  as: { uid: number; gid: number } | object = {},
): Record<string, unknown> & { ms: number } {
  const module = `import * as cordon from ${JSON.stringify(LIBRARY)}\n${code}`
  const started = Date.now()
  const out = spawnSync(process.execPath, ['--input-type=module', '-e', module], {
    encoding: 'utf8',
    timeout: timeoutMs,
    cwd: '/',
    ...as,
  })
  assert.equal(out.status, 0, `host failed: ${out.stderr}`)
  return {
    ...(JSON.parse(out.stdout.trim().split('\n').at(-1)!) as Record<string, unknown>),
    ms: Date.now() - started,
  }
}

/** The parent pid of `pid` (field 4 of /proc/<pid>/stat, after the name in parentheses). */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

const alive = (pid: number) => {
  try {
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ')
  } catch {
    return false
  }
}

const skip = noSpawner || noLauncher

describe('the default spawner', { skip }, () => {
  it('the first run forks the host while it opens; the runs after it go through it', async () => {
    const host = asHost(`
      const parent = async (options = {}) => {
        const h = cordon.start(['sleep', '0.2'], { isolation: 'process', ...options })
        const { readFileSync } = await import('node:fs')
        const stat = readFileSync('/proc/' + h.pid + '/stat', 'utf8')
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
        await h.result
        return ppid
      }
      const first = await parent()
      const opened = cordon.defaultSpawner()?.pid
      const second = await parent()
      const forked = await parent({ spawner: false })
      console.log(JSON.stringify({ host: process.pid, first, opened, second, forked }))
    `)
    assert.equal(host.first, host.host, 'the first run is a fork of the host')
    assert.equal(typeof host.opened, 'number', 'opened meanwhile')
    assert.equal(host.second, host.opened, 'the next run is a child of the default spawner')
    assert.equal(host.forked, host.host, 'spawner: false forks the host')
  })

  it('spawner: false never opens one; an idle one never keeps the host alive', async () => {
    const none = asHost(`
      for (let i = 0; i < 3; i++) await cordon.run(['true'], { isolation: 'process', spawner: false })
      await new Promise((r) => setTimeout(r, 200))
      console.log(JSON.stringify({ pid: cordon.defaultSpawner()?.pid ?? null }))
    `)
    assert.equal(none.pid, null)
    // The host ends on its own once its last run is done: the helper and its pipes are unreferenced.
    const idle = asHost(`
      for (let i = 0; i < 3; i++) await cordon.run(['true'], { isolation: 'process' })
      await new Promise((r) => setTimeout(r, 100))
      console.log(JSON.stringify({ pid: cordon.defaultSpawner()?.pid ?? null }))
    `)
    assert.equal(typeof idle.pid, 'number')
    assert.ok(idle.ms < 20_000)
    // It dies with its host (parent-death signal).
    assert.equal(await waitFor(() => !alive(idle.pid as number), 5000), true, 'the helper outlived its host')
  })

  it('a dead or closed one is replaced in the background; the run that finds it so forks the host', async () => {
    await run(['true'], { isolation: 'process' })
    assert.equal(await waitFor(() => defaultSpawner() !== undefined, 5000), true)
    const first = defaultSpawner()!.pid
    process.kill(first, 'SIGKILL')
    await waitFor(() => !alive(first), 5000)
    await new Promise((r) => setTimeout(r, 50)) // its end is read by the host
    const during = await run(['true'], { isolation: 'process' })
    assert.equal(during.status, 'ok', 'not an error: nothing had started on the dead one')
    assert.equal(await waitFor(() => defaultSpawner() !== undefined, 5000), true)
    const second = defaultSpawner()!.pid
    assert.notEqual(second, first)
    // Closed by its user: the same, and the one closed exits.
    await defaultSpawner()!.close()
    assert.equal(defaultSpawner(), undefined)
    assert.equal((await run(['true'], { isolation: 'process' })).status, 'ok')
    assert.equal(await waitFor(() => defaultSpawner() !== undefined, 5000), true)
    assert.notEqual(defaultSpawner()!.pid, second)
    assert.equal(alive(second), false)
  })

  it('a run in flight on it when it dies ends as error; the next one runs', async () => {
    await run(['true'], { isolation: 'process' })
    assert.equal(await waitFor(() => defaultSpawner() !== undefined, 5000), true)
    const handle = start(['sleep', '30'], { isolation: 'process' })
    assert.equal(parentOf(handle.pid!), defaultSpawner()!.pid)
    process.kill(defaultSpawner()!.pid, 'SIGKILL')
    const result = await handle.result
    assert.equal(result.status, 'error')
    assert.equal((await run(['true'], { isolation: 'process' })).status, 'ok')
  })

  it('after the host changes its uid, its runs fork: a helper of the new uid could not reach its fds', {
    skip: notRoot,
  }, () => {
    const host = asHost(`
      await cordon.run(['true'], { isolation: 'process' })
      while (!cordon.defaultSpawner()) await new Promise((r) => setTimeout(r, 10))
      const before = cordon.defaultSpawner().pid
      process.setgid(65534)
      process.setuid(65534)
      // The machine's facts are reused for up to a second (recentCapabilities): past it, runs are not root's.
      await new Promise((r) => setTimeout(r, 1100))
      const results = []
      for (let i = 0; i < 3; i++) {
        results.push((await cordon.run(['true'], { isolation: 'process', cwd: '/' })).status)
        await new Promise((r) => setTimeout(r, 50))
      }
      console.log(JSON.stringify({ before, after: cordon.defaultSpawner()?.pid ?? null, results }))
    `)
    assert.deepEqual(host.results, ['ok', 'ok', 'ok'], 'no SpawnerError: the old one is simply not used')
    assert.equal(typeof host.before, 'number')
    assert.equal(host.after, null, 'none opened as the new uid either')
  })

  // As a normal user the process tier is the host's uid in the host's pid namespace: the kernel lets it set
  // the limits and priority of every process of that uid, the spawner (whose every later run inherits a
  // hard limit no one can raise again) and the host itself.
  it("a run cannot set the spawner's or the host's limits or priority, nor its uid's", {
    skip: notRoot,
  }, () => {
    const code = `
      await cordon.run(['true'], { isolation: 'process', cwd: '/' })
      while (!cordon.defaultSpawner()) await new Promise((r) => setTimeout(r, 10))
      const sp = cordon.defaultSpawner().pid
      const attack = await cordon.run(['sh', '-c', [
        'prlimit --pid ' + sp + ' --nofile=12:12 --nproc=1:1',
        'prlimit --pid ' + process.pid + ' --nofile=40:40',
        'renice -n 19 -p ' + sp, 'renice -n 19 -u ' + process.getuid(),
        'taskset -p 1 ' + sp, 'chrt -i -p 0 ' + process.pid, 'ionice -c 3 -p ' + sp,
      ].map((c) => c + ' >/dev/null 2>&1').concat(
        // Its own: still allowed (pid 0).
        'ulimit -n 100 && nice -n 5 true && echo own',
      ).join('; ')], { isolation: 'process', cwd: '/' })
      const victim = await cordon.run(['sh', '-c', 'ulimit -n; ulimit -Hn; nice; taskset -p $$'], { isolation: 'process', cwd: '/' })
      const { readFileSync } = await import('node:fs')
      const nofile = readFileSync('/proc/self/limits', 'utf8').split('\\n').find((l) => l.startsWith('Max open files'))
      const stat = (pid) => readFileSync('/proc/' + pid + '/stat', 'utf8').slice(readFileSync('/proc/' + pid + '/stat', 'utf8').lastIndexOf(')') + 2).split(' ')
      console.log(JSON.stringify({ attack: attack.stdout, victim: victim.status, out: victim.stdout, nofile,
        niceHost: stat(process.pid)[16], niceSpawner: stat(sp)[16], policyHost: stat(process.pid)[38] }))
    `
    const host = asHost(code, 30_000, { uid: 65534, gid: 65534 })
    assert.equal(host.attack, 'own\n')
    assert.equal(host.victim, 'ok')
    assert.match(
      host.out as string,
      /^1024\n1024\n0\n/,
      'the next run got the limits and nice the attack set',
    )
    assert.doesNotMatch(host.nofile as string, /\b40\b/)
    assert.equal(host.niceHost, '0')
    assert.equal(host.niceSpawner, '0')
    assert.equal(host.policyHost, '0', 'SCHED_OTHER')
  })

  it('a worker thread has its own, which dies with the thread', () => {
    const host = asHost(`
      const { Worker } = await import('node:worker_threads')
      const lib = ${JSON.stringify(LIBRARY)}
      const worker = new Worker(\`
        import(\${JSON.stringify(lib)}).then(async (cordon) => {
          const { parentPort } = await import('node:worker_threads')
          await cordon.run(['true'], { isolation: 'process' })
          while (!cordon.defaultSpawner()) await new Promise((r) => setTimeout(r, 10))
          parentPort.postMessage(cordon.defaultSpawner().pid)
        })\`, { eval: true })
      const inWorker = await new Promise((r) => worker.once('message', r))
      await worker.terminate()
      const { readFileSync } = await import('node:fs')
      let gone = false
      for (let i = 0; i < 200 && !gone; i++) {
        try { gone = readFileSync('/proc/' + inWorker + '/stat', 'utf8').includes(') Z ') } catch { gone = true }
        if (!gone) await new Promise((r) => setTimeout(r, 10))
      }
      console.log(JSON.stringify({ inWorker, main: cordon.defaultSpawner()?.pid ?? null, gone }))
    `)
    assert.equal(typeof host.inWorker, 'number')
    assert.equal(host.main, null, "the main thread's module state is its own: no helper opened there")
    assert.equal(host.gone, true, 'the helper died with its thread')
  })
})
