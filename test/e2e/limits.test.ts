// Every limit is hit for real, in both tiers, and classified as that limit.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { run } from '../../src/index.js'
import { notRoot, skipTier, TIERS, worldWritableDir } from '../helpers.js'

for (const tier of TIERS) {
  describe(`limits (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier

    // A core_pattern that pipes to a handler (systemd-coredump, apport) runs it as root on the host with
    // the whole dump, whatever RLIMIT_CORE says, unless it is exactly 1: the kernel then aborts the dump.
    it('core dumps: RLIMIT_CORE is 1, which no pipe handler is run for, and a crash leaves no core file', async () => {
      const dir = worldWritableDir()
      const r = await run(
        [
          'python3',
          '-c',
          'import resource, os; print(resource.getrlimit(resource.RLIMIT_CORE), flush=True); os.abort()',
        ],
        { isolation, cwd: dir, writable: [dir] },
      )
      assert.equal(r.stdout, '(1, 1)\n', r.stderr)
      assert.equal(r.status, 'signaled')
      assert.equal(existsSync(path.join(dir, 'core')), false)
    })

    it('wall time: SIGTERM first, so a program can clean up', async () => {
      const r = await run(['sh', '-c', 'trap "echo got-term; exit 7" TERM; while :; do sleep 0.05; done'], {
        isolation,
        limits: { wallTimeMs: 300, killGraceMs: 5000 },
      })
      assert.equal(r.status, 'timeout')
      assert.equal(r.isolation, tier)
      assert.match(r.stdout, /got-term/)
      assert.deepEqual(r.violation, { kind: 'timeout', limit: 300, message: 'wall time exceeded 300ms' })
      assert.ok(r.wallMs < 4000, `stopped at SIGTERM, not after the grace (${r.wallMs} ms)`)
    })

    // bwrap's init ends the PID namespace as soon as its one child (the shell) exits, so in the namespace
    // tier the grace reaches only the program cordon started.
    it('wall time: the whole tree gets the grace, not only the program at its top', {
      skip: tier === 'namespace' ? "bwrap's init takes the namespace down with its child" : false,
    }, async () => {
      const child =
        'import signal, sys, time\n' +
        'def term(*_):\n  time.sleep(0.5); print("child done", flush=True); sys.exit(0)\n' +
        'signal.signal(signal.SIGTERM, term); print("ready", flush=True); time.sleep(30)'
      const r = await run(['sh', '-c', 'python3 -c "$0"', child], {
        isolation,
        limits: { wallTimeMs: 1000, killGraceMs: 5000 },
      })
      assert.equal(r.status, 'timeout')
      assert.equal(r.stdout, 'ready\nchild done\n', r.stderr)
      // The same child with its output and the log fd elsewhere: the pipes close with the shell, the grace
      // goes on.
      const dir = worldWritableDir()
      const quiet = child.replace('print("child done", flush=True)', `open("${dir}/done", "w").write("x")`)
      const q = await run(['sh', '-c', 'python3 -c "$0" >/dev/null 2>&1 6>&-', quiet], {
        isolation,
        writable: [dir],
        limits: { wallTimeMs: 1000, killGraceMs: 5000 },
      })
      assert.equal(q.status, 'timeout')
      assert.equal(existsSync(path.join(dir, 'done')), true, 'the child finished its clean-up')
    })

    it('wall time: SIGKILL after the grace when SIGTERM is ignored', async () => {
      const r = await run(['sh', '-c', 'trap "" TERM; while :; do sleep 0.05; done'], {
        isolation,
        limits: { wallTimeMs: 200, killGraceMs: 300 },
      })
      assert.equal(r.status, 'timeout')
      assert.equal(r.signal, 'SIGKILL')
      assert.ok(r.wallMs >= 450, `waited for the grace (${r.wallMs} ms)`)
      assert.ok(r.wallMs < 5000, `then killed (${r.wallMs} ms)`)
    })

    it('CPU time: a busy loop is stopped by RLIMIT_CPU', async () => {
      const r = await run(['sh', '-c', 'while :; do :; done'], { isolation, limits: { cpuTimeMs: 1000 } })
      assert.equal(r.status, 'cpu-time')
      assert.equal(r.violation?.limit, 1000)
    })

    it('memory: an allocation past the limit is `memory`, not an exit code', async () => {
      const r = await run(['python3', '-c', 'x = bytearray(400 * 1024 * 1024)'], {
        isolation,
        limits: { memoryBytes: '128M' },
      })
      assert.equal(r.status, 'memory')
      assert.equal(r.violation?.limit, 128 * 1024 * 1024)
    })

    it('memory: node exhausting its heap under the limit is `memory`', async () => {
      const r = await run(['node', '-e', 'const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))'], {
        isolation,
        limits: { memoryBytes: '128M' },
      })
      assert.equal(r.status, 'memory')
    })

    it('memory: node still starts under 256M (no address-space limit)', async () => {
      const r = await run(['node', '-e', 'console.log(1 + 1)'], {
        isolation,
        limits: { memoryBytes: '256M' },
      })
      assert.equal(r.status, 'ok')
      assert.equal(r.stdout, '2\n')
    })

    it('processes: forking past maxProcesses fails and is `process-limit`', async () => {
      const r = await run(['sh', '-c', 'for i in $(seq 40); do sleep 2 & done; wait'], {
        isolation,
        limits: { maxProcesses: 8 },
      })
      assert.equal(r.status, 'process-limit')
      assert.equal(r.violation?.limit, 8)
    })

    it('file size: writing past maxFileSizeBytes is `file-size`', async () => {
      const dir = worldWritableDir()
      const r = await run(['sh', '-c', `head -c 100000 /dev/zero > ${dir}/big`], {
        isolation,
        writable: [dir],
        limits: { maxFileSizeBytes: '16K' },
      })
      assert.equal(r.status, 'file-size')
      assert.equal(r.violation?.limit, 16 * 1024)
    })

    it('file size: Python, which ignores SIGXFSZ and gets EFBIG, is `file-size` too', async () => {
      const write = "import os; open(os.environ['TMPDIR'] + '/big', 'wb').write(b'x' * 100000)"
      const r = await run(['python3', '-c', write], { isolation, limits: { maxFileSizeBytes: '16K' } })
      assert.equal(r.status, 'file-size', r.stderr)
    })

    // Two default sandboxes used to fill the host's whole file table (ENFILE for every process on it).
    const OPEN_2000 =
      'import errno, json, resource\nfs, err = [], None\n' +
      'try:\n  for _ in range(2000): fs.append(open("/dev/null"))\n' +
      'except OSError as e: err = errno.errorcode[e.errno]\n' +
      'n = len(fs); del fs[:10]\nprint(json.dumps({"opened": n, "error": err, "limit": resource.getrlimit(resource.RLIMIT_NOFILE)}))'

    it('open files: 1024 per process by default, soft = hard; past it an ordinary EMFILE', async () => {
      const r = await run(['python3', '-c', OPEN_2000], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      const out = JSON.parse(r.stdout)
      assert.equal(out.error, 'EMFILE')
      assert.deepEqual(out.limit, [1024, 1024])
      assert.ok(out.opened > 1000 && out.opened < 1024, `opened ${out.opened}`)
    })

    it('open files: maxOpenFiles raises it', async () => {
      const r = await run(['python3', '-c', OPEN_2000], { isolation, limits: { maxOpenFiles: 4096 } })
      assert.equal(r.status, 'ok', r.stderr)
      assert.deepEqual(JSON.parse(r.stdout), { opened: 2000, error: null, limit: [4096, 4096] })
    })

    it('open files: the hard limit cannot be raised from inside', async () => {
      const r = await run(['sh', '-c', 'ulimit -n 2048 2>/dev/null && echo raised; ulimit -Hn'], {
        isolation,
        limits: { maxOpenFiles: 64 },
      })
      assert.equal(r.stdout, '64\n')
    })

    it('open files: a program that dies of EMFILE keeps its own exit (no kernel counter says it was the limit)', async () => {
      const r = await run(['python3', '-c', '[open("/dev/null") for _ in range(100)]'], {
        isolation,
        limits: { maxOpenFiles: 32 },
      })
      assert.equal(r.status, 'nonzero-exit')
      assert.match(r.stderr, /Too many open files/)
      assert.equal(r.violation, null)
    })

    it('open files: the smallest limit (16) still starts the sandbox, log channel included', async () => {
      const r = await run(['sh', '-c', 'echo \'{"level":"info","msg":"hi"}\' >&$CORDON_LOG_FD; ulimit -n'], {
        isolation,
        limits: { maxOpenFiles: 16 },
      })
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, '16\n')
      assert.deepEqual(r.logs, [{ level: 'info', msg: 'hi' }])
    })

    it('output: the cap stops the sandbox and keeps exactly the cap', async () => {
      const r = await run(['yes'], { isolation, limits: { maxOutputBytes: '64K' } })
      assert.equal(r.status, 'output-limit')
      assert.equal(r.truncated, true)
      assert.equal(r.outputBytes, 64 * 1024)
      assert.equal(r.stdout.length, 64 * 1024)
      assert.ok(r.wallMs < 5000, 'r.wallMs < 5000')
    })

    it('a limit wins over the exit code it caused', async () => {
      const r = await run(['sh', '-c', 'yes; exit 0'], { isolation, limits: { maxOutputBytes: 1000 } })
      assert.equal(r.status, 'output-limit')
    })
  })
}

// Without a cgroup the same limits hold per process through rlimits, classified from what the program
// reports; perProcessLimits says so.
for (const tier of TIERS) {
  describe(`limits without cgroups (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const base = { isolation: tier, cgroup: { mode: 'off' } } as const

    it('memory: RLIMIT_DATA (memoryBytes + the 1 GiB start-up reserve) makes the allocation fail: `memory`', async () => {
      const r = await run(['python3', '-c', 'x = bytearray(1300 * 1024 * 1024)'], {
        ...base,
        limits: { memoryBytes: '128M' },
      })
      assert.equal(r.status, 'memory')
      assert.match(r.violation!.message, /allocation failed/)
      assert.deepEqual(r.perProcessLimits, ['cpuTimeMs', 'memoryBytes', 'maxProcesses'])
    })

    it('memory: node under 256M still starts', async () => {
      const r = await run(['node', '-e', 'console.log(1)'], { ...base, limits: { memoryBytes: '256M' } })
      assert.equal(r.status, 'ok')
    })

    it('CPU time: RLIMIT_CPU stops a busy loop', async () => {
      const r = await run(['sh', '-c', 'while :; do :; done'], { ...base, limits: { cpuTimeMs: 1000 } })
      assert.equal(r.status, 'cpu-time')
      assert.equal(r.signal, 'SIGXCPU')
    })

    it('processes: RLIMIT_NPROC of the sandbox uid refuses the fork', { skip: notRoot }, async () => {
      const r = await run(['sh', '-c', 'for i in $(seq 40); do sleep 2 & done; wait'], {
        ...base,
        limits: { maxProcesses: 8 },
      })
      assert.equal(r.status, 'process-limit')
    })
  })
}
