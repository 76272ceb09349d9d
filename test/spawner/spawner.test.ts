// A spawner starts sandboxes from a small helper process instead of forking the host: the same results,
// limits and clean-up as without one, and its own contract (pipes, exit, kill, close, death).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { listProcesses } from '../../src/host/procs.js'
import { uidPoolSchema } from '../../src/host/uid-pool.js'
import { openSpawner, run, SpawnerError, start } from '../../src/index.js'
import { O_PATH } from '../../src/plan/paths.js'
// The run path's own primitive (spawn, open), which the public Spawner type does not show.
import { type SpawnedProcess, Spawner, type SpawnRequest } from '../../src/spawner/spawner.js'
import {
  asUnprivileged,
  marker,
  noSpawner,
  notRoot,
  noUnprivileged,
  processesWith,
  skipTier,
  TIERS,
  tempDir,
  waitFor,
  worldWritableDir,
} from '../helpers.js'

const LIBRARY = fileURLToPath(new URL('../../dist/index.js', import.meta.url))

/** Run `code` as a host process of its own, with openSpawner and run imported from the built library. */
function asHost(code: string) {
  const module = `import { openSpawner, run } from ${JSON.stringify(LIBRARY)}\n${code}`
  return spawnSync(process.execPath, ['--input-type=module', '-e', module], {
    encoding: 'utf8',
    timeout: 20_000,
  })
}

/** Everything a process wrote to `stream`, once it ends. */
function text(stream: NodeJS.ReadableStream | null): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = ''
    stream?.setEncoding('utf8')
    stream?.on('data', (s: string) => {
      out += s
    })
    stream?.on('end', () => resolve(out))
    stream?.on('error', reject)
  })
}

function closed(child: SpawnedProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })))
}

const ENV = { PATH: '/usr/bin:/bin' }
const sh = (script: string): SpawnRequest => ({
  file: '/bin/sh',
  args: ['-c', script],
  cwd: '/',
  env: ENV,
  detached: false,
  stdio: ['null', 'read', 'read'],
})

/** A spawner for a suite: opened before its tests, closed after them; `.it` is the spawner. */
function suiteSpawner(): { it: Spawner } {
  const holder = {} as { it: Spawner }
  before(async () => {
    holder.it = await openSpawner()
  })
  after(() => holder.it.close())
  return holder
}

describe('spawner: its own contract', { skip: noSpawner }, () => {
  const fixture = suiteSpawner()

  it("passes an fd of the host's (O_PATH) at any number: the same file, whatever its name points at by then", async () => {
    const base = tempDir('cordon-hostfd-')
    mkdirSync(path.join(base, 'judged'))
    mkdirSync(path.join(base, 'other'))
    writeFileSync(path.join(base, 'judged', 'mark'), 'judged')
    const fd = openSync(path.join(base, 'judged'), O_PATH)
    // The name now leads elsewhere: the child must still get the directory the fd was opened on.
    renameSync(path.join(base, 'judged'), path.join(base, 'moved'))
    symlinkSync(path.join(base, 'other'), path.join(base, 'judged'))
    const stdio: SpawnRequest['stdio'] = ['null', 'read', 'read', ...Array(297).fill('none'), fd]
    const child = fixture.it.spawn({
      ...sh('readlink /proc/self/fd/300; cat /proc/self/fd/300/mark; echo; ls /proc/self/fd'),
      stdio,
    })
    closeSync(fd) // the spawner has its own by now
    const [out, err] = await Promise.all([text(child.stdout), text(child.stderr), closed(child)])
    assert.equal(err, '')
    const [where, mark, ...fds] = out.trim().split('\n')
    assert.equal(where, path.join(base, 'moved'))
    assert.equal(mark, 'judged')
    assert.deepEqual(
      fds.filter((n) => n !== '3'),
      ['0', '1', '2', '300'],
      'nothing else of the host or the spawner',
    )
  })

  it('refuses pipes beyond the first 16 fds, and an fd the host does not have', async () => {
    assert.throws(
      () =>
        fixture.it.spawn({
          ...sh('true'),
          stdio: ['null', 'read', 'read', ...Array(14).fill('none'), 'read'],
        }),
      /pipes go to the first 16 fds/,
    )
    const child = fixture.it.spawn({ ...sh('true'), stdio: ['null', 'read', 'read', 987654] })
    const error = await new Promise<Error>((resolve) => child.once('error', resolve))
    assert.match(error.message, /ENOENT/)
  })

  it('pipes both ways, then exit, then close', async () => {
    const child = fixture.it.spawn({ ...sh('cat; echo err >&2; exit 3'), stdio: ['write', 'read', 'read'] })
    const order: string[] = []
    child.on('exit', () => order.push('exit'))
    const done = closed(child).then((r) => {
      order.push('close')
      return r
    })
    const [out, err] = [text(child.stdout), text(child.stderr)]
    child.stdin?.end('hello\n')
    assert.deepEqual(await done, { code: 3, signal: null })
    assert.equal(await out, 'hello\n')
    assert.equal(await err, 'err\n')
    assert.deepEqual(order, ['exit', 'close'])
    assert.equal(child.exitCode, 3)
  })

  it('names a death by signal; one Node has no name for reads as 128+N', async () => {
    const term = fixture.it.spawn(sh('kill -TERM $$'))
    assert.deepEqual(await closed(term), { code: null, signal: 'SIGTERM' })
    const rt = fixture.it.spawn(sh('kill -35 $$'))
    assert.deepEqual(await closed(rt), { code: 128 + 35, signal: null })
    // Numbers with two names get Node's: SIGABRT (not SIGIOT), SIGIO (not SIGPOLL).
    for (const name of ['ABRT', 'IO']) {
      const child = fixture.it.spawn(sh(`kill -${name} $$`))
      assert.deepEqual(await closed(child), { code: null, signal: `SIG${name}` })
    }
  })

  it('kill() signals the process, and after its end returns false', async () => {
    const child = fixture.it.spawn(sh('exec sleep 30'))
    assert.equal(child.kill('SIGKILL'), true)
    assert.deepEqual(await closed(child), { code: null, signal: 'SIGKILL' })
    assert.equal(child.kill('SIGKILL'), false)
  })

  it('the child has exactly the fds asked for, and is a session leader when detached', async () => {
    const child = fixture.it.spawn({
      ...sh('ls /proc/self/fd; cut -d" " -f6 /proc/self/stat'),
      detached: true,
      stdio: ['null', 'read', 'read', 'none', 'none', 'none', 'read'],
    })
    const out = text(child.stdout)
    await closed(child)
    const [...lines] = (await out).trim().split('\n')
    const sid = Number(lines.pop())
    // ls's own directory fd shows up too (3): the rest is 0-2 and 6, none of the spawner's.
    assert.deepEqual(
      lines.map(Number).filter((fd) => fd !== 3),
      [0, 1, 2, 6],
    )
    assert.equal(sid, child.pid)
  })

  it('a program that cannot be started is an error, then close, as with Node: no exit, no code', async () => {
    const child = fixture.it.spawn({ ...sh(''), file: '/nonexistent/program' })
    const events: string[] = []
    child.on('exit', () => events.push('exit'))
    const error = new Promise<NodeJS.ErrnoException>((resolve) => child.once('error', resolve))
    assert.deepEqual(await closed(child), { code: null, signal: null })
    assert.equal((await error).code, 'ENOENT')
    assert.deepEqual(events, [])
    const inMissingDir = fixture.it.spawn({ ...sh('true'), cwd: '/nonexistent' })
    const error2 = new Promise<Error>((resolve) => inMissingDir.once('error', resolve))
    await closed(inMissingDir)
    assert.match((await error2).message, /ENOENT/)
  })

  it('forks the spawner, not the host', async () => {
    const child = fixture.it.spawn(sh('cut -d" " -f4 /proc/$$/stat'))
    const out = text(child.stdout)
    await closed(child)
    assert.equal(Number(await out), fixture.it.pid)
  })

  it('never blocks on its events: 400 quick processes started in one synchronous stretch', async () => {
    // Their exit lines pile up unread until this loop yields; a spawner that waited for the host to read
    // them would never answer the next spawn, and the host would wait for that answer forever.
    const children = Array.from({ length: 400 }, () =>
      fixture.it.spawn({ ...sh('true'), stdio: ['null', 'null', 'null'] }),
    )
    const ends = await Promise.all(children.map(closed))
    assert.ok(
      ends.every((e) => e.code === 0),
      'all exited 0',
    )
  })

  it("is a session of its own: Ctrl-C at the host's terminal does not reach it", () => {
    const [sid, pgrp] = [
      Number(stat(fixture.it.pid).split(' ')[3]),
      Number(stat(fixture.it.pid).split(' ')[2]),
    ]
    assert.equal(pgrp, fixture.it.pid)
    assert.equal(sid, fixture.it.pid)
  })
})

describe('spawner: close and death', { skip: noSpawner }, () => {
  it('close() waits for what runs, ends the spawner, and refuses anything new', async () => {
    const spawner = await openSpawner()
    const child = spawner.spawn(sh('sleep 0.3; echo done'))
    const out = text(child.stdout)
    await spawner.close()
    assert.equal(await out, 'done\n')
    assert.ok(!existsSync(`/proc/${spawner.pid}`) || /^Z/.test(stat(spawner.pid)), 'the spawner is gone')
    assert.throws(() => spawner.spawn(sh('true')), SpawnerError)
    await assert.rejects(run(['true'], { spawner }), /the spawner is closed/)
  })

  it('when the spawner dies, what it was running ends as an error and the sandbox goes', {
    skip: skipTier('process'),
  }, async () => {
    const spawner = await openSpawner()
    const m = marker()
    const handle = start(['sleep', m], { isolation: 'process', spawner })
    assert.ok(await waitFor(() => processesWith(m).length > 0, 10_000), 'started')
    process.kill(spawner.pid, 'SIGKILL')
    const r = await handle.result
    assert.equal(r.status, 'error')
    assert.match(r.violation?.message ?? '', /spawner exited/)
    assert.ok(await waitFor(() => processesWith(m).length === 0, 10_000), 'sandbox gone')
    await assert.rejects(run(['true'], { spawner }), /the spawner has exited/)
  })

  it('when it dies, what it started dies too, and the host closes its ends', async () => {
    const spawner = await openSpawner()
    const fds = () => readdirSync('/proc/self/fd').length
    const before = fds()
    const m = marker()
    const child = spawner.spawn({ ...sh(`exec sleep ${m}`), stdio: ['null', 'null', 'null'] })
    assert.ok(await waitFor(() => processesWith(m).length === 1, 10_000), 'started')
    const error = new Promise<Error>((resolve) => child.once('error', resolve))
    process.kill(spawner.pid, 'SIGKILL')
    await closed(child)
    assert.match((await error).message, /spawner exited/)
    assert.ok(await waitFor(() => processesWith(m).length === 0, 10_000), 'its process died with it')
    assert.ok(fds() <= before - 2, `the request and reply fds are closed (${before} → ${fds()})`)
    await spawner.close()
  })

  it('a helper that fails at start is killed, not left running', async () => {
    const dir = tempDir('cordon-fake-spawner-')
    const m = marker()
    // Says ready with fds that do not exist, then stays: open() must fail and take it down.
    writeFileSync(path.join(dir, 'fake'), `#!/bin/sh\necho ready 900 901\nexec sleep ${m}\n`, { mode: 0o755 })
    await assert.rejects(Spawner.open(path.join(dir, 'fake')), /ENOENT/)
    assert.ok(await waitFor(() => processesWith(m).length === 0, 5000), 'the helper is gone')
  })

  it("a request too large for exec is that run's error; the spawner and its other runs go on", {
    skip: skipTier('process'),
  }, async () => {
    const spawner = await openSpawner()
    const neighbour = run(['sh', '-c', 'sleep 0.5; echo fine'], { isolation: 'process', spawner })
    // Over what exec could ever take (6 MiB), refused before the spawner reads it; below, exec refuses it.
    for (const size of [65 << 20, 7 << 20, 3 << 20]) {
      const big = await run(['true'], { isolation: 'process', spawner, env: { BIG: 'x'.repeat(size) } })
      assert.equal(big.status, 'error')
      assert.equal(big.exitCode, null, 'it never ran, as without a spawner')
      assert.match(big.violation?.message ?? '', /E2BIG/)
    }
    // And the spawner does not keep the memory it read them into: every later fork would copy it.
    const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${spawner.pid}/status`, 'utf8'))?.[1])
    assert.ok(rss < 4096, `spawner RSS ${rss} kB`)
    assert.equal((await neighbour).stdout, 'fine\n')
    assert.equal((await run(['true'], { isolation: 'process', spawner })).status, 'ok')
    await spawner.close()
  })

  it('more arguments than 65,536 start as they do without a spawner', async () => {
    const spawner = await openSpawner()
    const args = Array.from({ length: 70_000 }, () => 'x')
    const child = spawner.spawn({ ...sh('echo $#'), args: ['-c', 'echo $#', 'sh', ...args] })
    const out = text(child.stdout)
    assert.deepEqual(await closed(child), { code: 0, signal: null })
    assert.equal(await out, '70000\n')
    await spawner.close()
  })

  it("a run gets the host's umask of the moment, as with a fork of the host", async () => {
    const spawner = await openSpawner()
    const previous = process.umask(0o027)
    try {
      const r = await run(['sh', '-c', 'umask'], { spawner })
      // As root, on a pool uid, less the group's write bit (the pool's group shares workspaces).
      assert.equal(r.stdout.trim(), process.getuid?.() === 0 ? '0007' : '0027')
    } finally {
      process.umask(previous)
      await spawner.close()
    }
  })

  it('a host that changed its uid since opening is told so up front', { skip: notRoot }, () => {
    const host = asHost(`const spawner = await openSpawner()
process.setuid(65534)
try { await run(['true'], { spawner }); console.log('ran') } catch (e) { console.log(e.name, e.message) }
process.exit(0)`)
    assert.match(host.stdout, /SpawnerError .*uid 0, this process is now uid 65534/, host.stderr)
  })

  it('an idle spawner does not keep its host alive, and dies with it', async () => {
    const host = asHost(`const spawner = await openSpawner()
const r = await run(['true'], { spawner })
console.log(spawner.pid, r.status)`)
    assert.equal(host.status, 0, host.stderr)
    const [pid, status] = host.stdout.trim().split(' ')
    assert.equal(status, 'ok')
    assert.ok(await waitFor(() => !existsSync(`/proc/${pid}`), 5000), 'the spawner went with its host')
  })
})

function stat(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? ''
  } catch {
    return ''
  }
}

for (const tier of TIERS) {
  describe(`run() through a spawner (${tier} tier)`, { skip: noSpawner || skipTier(tier) }, () => {
    const isolation = tier
    const fixture = suiteSpawner()

    it('the same result as without one: output, stdin, exit code', async () => {
      const command = ['sh', '-c', 'echo out; read x; echo "got $x" >&2; exit 3']
      const via = await run(command, { isolation, spawner: fixture.it, stdin: 'hi\n' })
      const direct = await run(command, { isolation, stdin: 'hi\n' })
      for (const r of [via, direct]) {
        assert.equal(r.status, 'nonzero-exit')
        assert.equal(r.exitCode, 3)
        assert.equal(r.stdout, 'out\n')
        assert.equal(r.stderr, 'got hi\n')
        assert.equal(r.isolation, tier)
      }
    })

    it('the sandbox sees the same fds and environment as without one', async () => {
      const command = ['sh', '-c', 'ls /proc/self/fd | tr "\\n" " "; echo; env | sort']
      const via = await run(command, { isolation, spawner: fixture.it })
      const direct = await run(command, { isolation })
      const normalize = (s: string) => s.replace(/cordon-tmp-[^/\s]+/g, 'TMP')
      assert.equal(normalize(via.stdout), normalize(direct.stdout))
    })

    // Every limit, hit for real through the spawner.
    const cases: [string, readonly string[], Parameters<typeof run>[1], string][] = [
      ['wall time', ['sleep', '30'], { limits: { wallTimeMs: 300 } }, 'timeout'],
      ['CPU time', ['sh', '-c', 'while :; do :; done'], { limits: { cpuTimeMs: 1000 } }, 'cpu-time'],
      [
        'memory',
        ['python3', '-c', 'x = bytearray(400 * 1024 * 1024)'],
        { limits: { memoryBytes: '128M' } },
        'memory',
      ],
      [
        'processes',
        ['sh', '-c', 'for i in $(seq 40); do sleep 2 & done; wait'],
        { limits: { maxProcesses: 8 } },
        'process-limit',
      ],
      [
        'file size',
        ['sh', '-c', 'head -c 100000 /dev/zero > "$TMPDIR/big"'],
        { limits: { maxFileSizeBytes: '16K' } },
        'file-size',
      ],
      ['output', ['yes'], { limits: { maxOutputBytes: '64K' } }, 'output-limit'],
      ['a signal', ['sh', '-c', 'kill -KILL $$'], {}, 'signaled'],
    ]
    for (const [name, command, options, status] of cases) {
      it(`${name}: ${status}`, async () => {
        const r = await run(command, { ...options, isolation, spawner: fixture.it })
        assert.equal(r.status, status, r.stderr)
      })
    }

    it('output is exact across many chunks', async () => {
      const r = await run(['head', '-c', '3000000', '/dev/zero'], {
        isolation,
        spawner: fixture.it,
        limits: { maxOutputBytes: '4M' },
      })
      assert.equal(r.status, 'ok')
      assert.equal(r.outputBytes, 3_000_000)
    })

    it('cancel: the tree is gone', async () => {
      const m = marker()
      const controller = new AbortController()
      // The marker arrives as $1: only the two sleeps have "sleep <marker>" in their command lines.
      const command = ['sh', '-c', 'sleep "$1" & sleep "$1"', 'sh', m]
      const result = run(command, { isolation, spawner: fixture.it, signal: controller.signal })
      assert.ok(await waitFor(() => processesWith(`sleep ${m}`).length === 2, 10_000), 'started')
      controller.abort()
      assert.equal((await result).status, 'canceled')
      assert.deepEqual(processesWith(m), [])
    })

    it('no survivors: setsid, nohup and double-forked children are gone when run() resolves', {
      skip: tier === 'process' && notRoot,
    }, async () => {
      const m = marker()
      const script = `setsid sleep ${m} & nohup sleep ${m} >/dev/null 2>&1 & (sleep ${m} &) ; echo spawned`
      const r = await run(['sh', '-c', script], { isolation, spawner: fixture.it })
      assert.equal(r.stdout, 'spawned\n')
      assert.deepEqual(processesWith(m), [])
    })

    it('a writable directory works as without one', async () => {
      const dir = worldWritableDir()
      const r = await run(['sh', '-c', `echo x > ${dir}/f && cat ${dir}/f`], {
        isolation,
        spawner: fixture.it,
        writable: [dir],
      })
      assert.equal(r.stdout, 'x\n', r.stderr)
    })
  })
}

describe('spawner: an unprivileged host', { skip: noSpawner || noUnprivileged() }, () => {
  for (const tier of TIERS) {
    it(`runs ${tier}-tier sandboxes through its spawner as without one`, {
      skip: skipTier(tier),
    }, async () => {
      const out = await asUnprivileged<[string, string, string][]>(`
const { openSpawner } = await import(${JSON.stringify(LIBRARY)})
const spawner = await openSpawner()
const results = []
for (const [script, limits] of [['echo hi', {}], ['echo hi; sleep 5', { wallTimeMs: 300 }]]) {
  for (const via of [{}, { spawner }]) {
    const r = await run(['sh', '-c', script], { isolation: '${tier}', limits, ...via })
    results.push([r.status, r.stdout, r.isolation])
  }
}
await spawner.close()
return results`)
      const [ok, timeout] = (['ok', 'timeout'] as const).map((status) => [status, 'hi\n', tier])
      assert.deepEqual(out, [ok, ok, timeout, timeout])
    })
  }
})

describe('spawner: load', { skip: noSpawner || skipTier('namespace') }, () => {
  it('300 runs at concurrency 30 through one spawner leak no fds or processes', async () => {
    const spawner = await openSpawner()
    const openFds = () => readdirSync('/proc/self/fd').length
    const spawnerFds = () => readdirSync(`/proc/${spawner.pid}/fd`).length
    // A uid range of this test's own: other cordon hosts on the machine (the default pool) are not its leaks.
    const uidPool = { first: 62_100, count: 100 }
    await Promise.all(Array.from({ length: 30 }, () => run(['true'], { spawner, uidPool })))
    const [fdsBefore, spawnerBefore] = [openFds(), spawnerFds()]
    let next = 0
    const statuses = new Map<string, number>()
    const worker = async () => {
      while (next < 300) {
        next++
        const r = await run(['sh', '-c', 'echo out; echo err >&2'], { spawner, uidPool })
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: 30 }, worker))
    assert.deepEqual([...statuses], [['ok', 300]])
    assert.ok(openFds() <= fdsBefore + 2, `host fds ${fdsBefore} → ${openFds()}`)
    assert.equal(spawnerFds(), spawnerBefore, 'the spawner holds no fd of a finished run')
    const pool = uidPoolSchema.parse(uidPool)
    const left = listProcesses().filter(
      (p) => !p.zombie && p.uid >= pool.first && p.uid < pool.first + pool.count,
    )
    assert.deepEqual(left, [])
    await spawner.close()
  })
})
