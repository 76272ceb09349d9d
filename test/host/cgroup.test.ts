// test: slow, serial (memory and fork bombs and a CPU burn in real cgroups, with figures that other load would skew)
// Whole-sandbox limits and figures from a real cgroup: memory bomb, fork bomb, CPU burn in 4 processes.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { SandboxCgroup } from '../../src/host/cgroup.js'
import { pidsLimit } from '../../src/host/cgroup-files.js'
import { type CgroupSupport, cgroupDirs, sandboxCgroupName } from '../../src/host/cgroups.js'
import { probeCapabilities, run, start } from '../../src/index.js'
import { parsePolicy } from '../../src/policy/schema.js'
import { marker, processesWith, skipTier, TIERS, waitFor, worldWritableDir } from '../helpers.js'

const support = probeCapabilities().cgroup
const noCgroup = support.version === null ? `no usable cgroup: ${support.reason}` : false
const MiB = 1024 * 1024
const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

/** Sandbox cgroups this test process created and did not remove. */
function leftovers(s: CgroupSupport): string[] {
  const parents = s.version === 2 ? [s.parent] : s.version === 1 ? Object.values(s.parents) : []
  return parents.flatMap((dir) => readdirSync(dir).filter((n) => n.startsWith(`cordon-${process.pid}-`)))
}

/** Every thread of this process with its cgroups. */
function ownCgroups(): string[] {
  return readdirSync('/proc/self/task').map(
    (t) => `${t} ${readFileSync(`/proc/self/task/${t}/cgroup`, 'utf8')}`,
  )
}

/** See fillSockets. SO_MEMINFO's first word is what a socket's receive queue holds (UDP). */
const SOCKET_FILL = `
import json, os, resource, socket, struct, sys
kind, procs, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(4096)
def fill(share):
    fds = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 16
    total, held, chunk, tx = 0, [], b'x' * 65536, socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener = srv
    while total < share and len(held) < fds - 2:
        if kind == 'tcp':
            c = socket.create_connection(srv.getsockname()); s, _ = srv.accept(); held += [c, s]
        elif kind == 'unix':
            c, s = socket.socketpair(); held += [c, s]
            c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
        elif kind == 'udp':
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); held.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30); s.bind(('127.0.0.1', 0))
            for _ in range(200): tx.sendto(chunk[:60000], s.getsockname())
            total += struct.unpack('9I', s.getsockopt(socket.SOL_SOCKET, 55, 36))[0]
            continue
        else:
            if len(held) * 1000 < total // 65536 + 1:
                listener = socket.socket(); listener.bind(('127.0.0.1', 0)); listener.listen(4096)
                held.append(listener)
            c = socket.create_connection(listener.getsockname())
        c.setblocking(False)
        while total < share:
            try: total += c.send(chunk)
            except BlockingIOError: break
        if kind == 'backlog': c.close()
    return total, len(held)
# Each child reports, then holds its sockets until every one has reported: the total is held at once.
r, w = os.pipe(); hold, release = os.pipe()
for _ in range(procs):
    if os.fork() == 0:
        os.close(r); os.close(release)
        os.write(w, (json.dumps(fill(cap // procs)) + '\\n').encode()); os.close(w)
        os.read(hold, 1); os._exit(0)
os.close(w); os.close(hold)
done = [json.loads(line) for line in os.fdopen(r).read().split('\\n') if line]
print(json.dumps({'queued': sum(t for t, _ in done), 'sockets': sum(n for _, n in done)}), flush=True)
`

for (const tier of TIERS) {
  describe(`cgroup limits (${tier} tier)`, { skip: noCgroup || skipTier(tier) }, () => {
    const isolation = tier

    it('a memory bomb is `memory`, read from the kernel OOM counter; the peak is the whole sandbox', async () => {
      const r = await run(['python3', '-c', 'b = []\nwhile True: b.append(bytearray(8 << 20))'], {
        isolation,
        limits: { memoryBytes: '128M' },
      })
      assert.equal(r.status, 'memory')
      assert.match(r.violation!.message, /OOM kill/)
      assert.ok(r.maxRssBytes! > 100 * MiB && r.maxRssBytes! <= 128 * MiB, `peak ${r.maxRssBytes}`)
      assert.deepEqual(r.perProcessLimits, [])
    })

    it('memory is limited on the tree: four 48M children under a 128M limit', async () => {
      const child = 'import time; b = bytearray(48 << 20); b[::4096] = b"x" * len(b[::4096]); time.sleep(2)'
      // The shell fails when a child did (a bare `wait` exits 0 whatever its children did, which is ok).
      const script = `for i in 1 2 3 4; do python3 -c '${child}' & p="$p $!"; done; for c in $p; do wait $c || rc=1; done; exit \${rc:-0}`
      const r = await run(['sh', '-c', script], {
        isolation,
        limits: { memoryBytes: '128M' },
      })
      assert.equal(r.status, 'memory')
    })

    it('a fork bomb is `process-limit` from pids.events and the host still spawns', async () => {
      const m = marker()
      const bomb = `b() { sleep ${m} & b & }; b; wait`
      const r = await run(['sh', '-c', bomb], { isolation, limits: { maxProcesses: 32, wallTimeMs: '2s' } })
      assert.equal(r.status, 'process-limit')
      assert.match(r.violation!.message, /fork refused/)
      assert.equal(spawnSync('true').status, 0)
      assert.deepEqual(processesWith(m), [])
    })

    it('CPU time is the sum over 4 burning processes', async () => {
      const r = await run(['sh', '-c', 'for i in 1 2 3 4; do (while :; do :; done) & done; wait'], {
        isolation,
        limits: { cpuTimeMs: '1s', wallTimeMs: '20s' },
      })
      assert.equal(r.status, 'cpu-time')
      assert.ok(r.cpuMs! >= 1000 && r.cpuMs! < 3000, `cpuMs ${r.cpuMs}`)
    })

    it('cpuMs and maxRssBytes are exact figures for a normal run', async () => {
      const r = await run(['python3', '-c', 'b = bytearray(64 << 20); b[::4096] = b"x" * len(b[::4096])'], {
        isolation,
      })
      assert.equal(r.status, 'ok')
      assert.ok(r.cpuMs !== null && r.cpuMs >= 0, 'r.cpuMs !== null && r.cpuMs >= 0')
      assert.ok(r.maxRssBytes! >= 64 * MiB, `peak ${r.maxRssBytes}`)
    })

    // Socket buffers filled and never read, each one kernel memory the sandbox holds: `procs` processes
    // each fill sockets of one kind until EAGAIN, up to their share of `cap` bytes (so a sandbox that escapes
    // the limit does not take the host down with it) or their open-file limit. Prints the bytes queued.
    const fillSockets = (kind: 'tcp' | 'unix' | 'udp' | 'backlog', procs: number, cap: number) =>
      run(['python3', '-c', SOCKET_FILL, kind, String(procs), String(cap)], {
        isolation,
        // The namespace tier has a loopback of its own; the process tier needs the host's network for IP.
        network: isolation === 'namespace' ? 'none' : 'host',
        limits: { memoryBytes: '64M', maxOpenFiles: 4096, wallTimeMs: '60s' },
      })
    // Within `times` the limit, or the sandbox is stopped as `memory`.
    const heldTo = (times: number, r: { status: string; stdout: string; stderr: string }) => {
      if (r.status === 'memory') return
      assert.equal(r.status, 'ok', r.stderr)
      const { queued, sockets } = JSON.parse(r.stdout) as { queued: number; sockets: number }
      assert.ok(queued <= times * 64 * MiB, `queued ${queued} bytes in ${sockets} sockets under a 64M limit`)
    }

    it('TCP buffers count against the memory limit: a 64M sandbox cannot queue much more', async () => {
      heldTo(3, await fillSockets('tcp', 1, 8 * 64 * MiB))
    })

    it('TCP buffers: thousands of connections over 8 processes', {
      todo: 'past the cap the kernel still forces about one segment on each connection (~80 KiB on loopback) into a counter that no OOM kill enforces (v1); each connection costs 7-14 KiB of the memory limit, so a sandbox holds up to ~11x memoryBytes; see docs/accounting.md',
    }, async () => {
      heldTo(3, await fillSockets('tcp', 8, 8 * 64 * MiB))
    })

    it('UDP receive buffers count too (v1 charges them to the same TCP counter)', async () => {
      heldTo(3, await fillSockets('udp', 1, 8 * 64 * MiB))
    })

    it('unix socket buffers count against the memory limit too', async () => {
      heldTo(3, await fillSockets('unix', 1, 8 * 64 * MiB))
    })

    it('TCP connections never accepted, their clients closed: no fd holds them', {
      todo: 'the kernel charges a connection to a cgroup only once it is accepted (v1 and v2): bounded only by the host-wide tcp_mem; see docs/accounting.md',
    }, async () => {
      heldTo(3, await fillSockets('backlog', 1, 4 * 64 * MiB))
    })

    it('files kept open by mappings after their fds are closed count against the memory limit', async () => {
      // maxOpenFiles bounds fds, not files: each mapping keeps its file in the host's file table. What
      // bounds them is the memory each costs the cgroup (~0.5 KiB with its mapping).
      const pin = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
path = os.environ['TMPDIR'] + '/f'
open(path, 'wb').write(b'x' * 4096)
n, err = 0, None
while n < 200000:
    fd = os.open(path, os.O_RDONLY)
    p = libc.mmap(None, 4096, 1, 2, fd, 0); os.close(fd)
    if p == ctypes.c_void_p(-1).value: err = os.strerror(ctypes.get_errno()); break
    n += 1
print(n, err)
`
      const r = await run(['python3', '-c', pin], { isolation, limits: { memoryBytes: '16M' } })
      if (r.status !== 'memory') {
        const files = Number(r.stdout.split(' ')[0])
        assert.ok(files <= (16 * MiB) / 256, `${files} files kept open in a 16M sandbox: ${r.stdout}`)
      }
    })

    it('the cgroup is removed after ok, timeout, cancel and a crash', async () => {
      await run(['true'], { isolation })
      await run(['sleep', '5'], { isolation, limits: { wallTimeMs: 200 } })
      await run(['sleep', '5'], { isolation, signal: AbortSignal.timeout(200) })
      await run(['sh', '-c', 'kill -SEGV $$'], { isolation })
      assert.deepEqual(leftovers(support), [])
    })

    it('maxProcesses is exact: the program may have that many processes and no more', async () => {
      const limits = { maxProcesses: 3, wallTimeMs: '10s' }
      const fits = await run(['sh', '-c', 'sleep 0.3 & sleep 0.3 & wait'], { isolation, limits })
      assert.equal(fits.status, 'ok', fits.stderr)
      const over = await run(['sh', '-c', 'sleep 0.3 & sleep 0.3 & sleep 0.3 & wait'], { isolation, limits })
      assert.equal(over.status, 'process-limit', over.stderr)
    })

    it("the program is born in the sandbox's cgroup (bwrap's monitor too); cordon's own threads and the process tier's monitor stay out", async () => {
      const before = ownCgroups()
      const m = marker()
      const handle = start(['sleep', m], { isolation })
      // The program itself, not a launcher whose argv also holds the marker. Read from the host: inside,
      // bwrap's cgroup namespace shows the sandbox's cgroup as `/`.
      const cgroupOfSleep = () => {
        for (const pid of processesWith(m)) {
          try {
            if (readFileSync(`/proc/${pid}/comm`, 'utf8') === 'sleep\n')
              return readFileSync(`/proc/${pid}/cgroup`, 'utf8')
          } catch {
            // exited while we looked
          }
        }
        return undefined
      }
      let seen: string | undefined
      try {
        const found = await waitFor(() => {
          seen = cgroupOfSleep()
          return seen !== undefined
        }, 5000)
        assert.ok(found, 'sleep started')
        // What cordon spawned: in the namespace tier the launcher, now bwrap's monitor, joined before it
        // exec'd; the process tier's monitor forked the program first and stays out of the sandbox.
        const spawned = readFileSync(`/proc/${handle.pid}/cgroup`, 'utf8')
        if (isolation === 'namespace') assert.match(spawned, /memory:\S*\/cordon-/)
        else assert.doesNotMatch(spawned, /memory:\S*\/cordon-/)
      } finally {
        handle.kill()
        await handle.result
      }
      assert.match(seen ?? '', /memory:\S*\/cordon-/)
      assert.deepEqual(ownCgroups(), before)
    })

    it('a memory limit below what the launcher needs is `memory`, and never takes the host down', () => {
      // The launcher (and bwrap) run under the limit; cordon runs in a process of its own all the same.
      for (const memory of ['64K', '1M']) {
        const r = spawnSync(
          process.execPath,
          [CLI, 'run', '--json', '--isolation', isolation, '--memory', memory, '--', 'true'],
          {
            encoding: 'utf8',
          },
        )
        assert.equal(r.signal, null, `cordon itself was killed (${r.signal}) at --memory ${memory}`)
        const result = JSON.parse(r.stdout) as { status: string }
        assert.ok(['ok', 'memory'].includes(result.status), `--memory ${memory}: ${r.stdout}`)
      }
    })

    // Only the namespace tier adds helpers (bwrap's two) to pids.max: in the process tier no valid option
    // reaches past the kernel's bound. Both tiers make their cgroup through the same code.
    const noRefusal =
      isolation === 'process' &&
      'the process tier adds no helper to pids.max: no valid option makes the kernel refuse'
    it('a cgroup the kernel refuses to make is an `error` naming it, and the program never runs', {
      skip: noRefusal,
    }, async () => {
      const dir = worldWritableDir()
      const ran = path.join(dir, 'ran')
      // pids.max takes at most 4194304 (the schema's bound too), and the tier adds its own helpers: the
      // kernel refuses the write with EINVAL.
      const r = await run(['sh', '-c', `touch ${ran}`], {
        isolation,
        writable: [dir],
        limits: { maxProcesses: 4_194_304 },
      })
      assert.equal(r.status, 'error')
      assert.equal(r.violation?.limit, 'cgroup')
      assert.match(r.violation?.message ?? '', /could not create the sandbox cgroup: .*EINVAL/)
      assert.equal(existsSync(ran), false, 'the program ran')
      assert.deepEqual(leftovers(support), [])
    })

    it("cgroup mode 'off' says which limits held per process only", async () => {
      const r = await run(['true'], { isolation, cgroup: { mode: 'off' } })
      assert.deepEqual(r.perProcessLimits, ['cpuTimeMs', 'memoryBytes', 'maxProcesses'])
      assert.equal(r.cpuMs, null)
    })
  })
}

describe('a sandbox cgroup on its own', { skip: noCgroup }, () => {
  it('lists its members (none when empty), kills them all and is removed', async () => {
    if (support.version === null) return
    const dirs = cgroupDirs(support, sandboxCgroupName())
    const cgroup = SandboxCgroup.create(support, [], dirs)
    const child = spawn('sleep', ['30'], { stdio: 'ignore' })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    try {
      assert.deepEqual(cgroup.pids(), [], 'a new cgroup is empty')
      for (const dir of dirs.values()) writeFileSync(path.join(dir, 'cgroup.procs'), String(child.pid))
      assert.deepEqual(cgroup.pids(), [child.pid])
      cgroup.kill()
      await exited
      assert.ok(await waitFor(() => cgroup.pids().length === 0, 5000), `still inside: ${cgroup.pids()}`)
    } finally {
      child.kill('SIGKILL')
      await cgroup.remove()
    }
    for (const dir of dirs.values()) assert.equal(existsSync(dir), false, `${dir} removed`)
  })

  it('kills a tree that keeps forking, in passes that converge', async () => {
    if (support.version === null) return
    const dirs = cgroupDirs(support, sandboxCgroupName())
    const { limits } = parsePolicy({ limits: { maxProcesses: 40 } })
    const cgroup = SandboxCgroup.create(support, [pidsLimit(support.version, limits, 0)], dirs)
    const m = marker()
    // It starts forking only once it is inside: a child forked before the move would stay outside.
    const forker = spawn('sh', ['-c', `read go; while :; do sleep ${m} & done`], {
      stdio: ['pipe', 'ignore', 'ignore'],
    })
    try {
      for (const dir of dirs.values()) writeFileSync(path.join(dir, 'cgroup.procs'), String(forker.pid))
      forker.stdin!.write('go\n')
      assert.ok(await waitFor(() => cgroup.pids().length > 20, 5000), 'the tree grew')
      const deadline = Date.now() + 5000
      while (cgroup.pids().length > 0 && Date.now() < deadline) {
        cgroup.kill()
        await new Promise((r) => setTimeout(r, 5))
      }
      assert.deepEqual(cgroup.pids(), [], 'still inside')
      assert.deepEqual(processesWith(m), [])
    } finally {
      forker.kill('SIGKILL')
      await cgroup.remove()
    }
  })

  it('reads through kept-open files are fresh each time, and removal closes them', async () => {
    if (support.version === null) return
    const dirs = cgroupDirs(support, sandboxCgroupName())
    const cgroup = SandboxCgroup.create(support, [], dirs)
    const burner = spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' })
    const exited = new Promise((resolve) => burner.once('exit', resolve))
    try {
      for (const dir of dirs.values()) writeFileSync(path.join(dir, 'cgroup.procs'), String(burner.pid))
      cgroup.keepOpen()
      const first = cgroup.cpuMs() ?? 0
      const later = await waitFor(() => (cgroup.cpuMs() ?? 0) >= first + 50, 10_000)
      assert.ok(later, `cpuMs stayed at ${cgroup.cpuMs()} after ${first}`)
      assert.deepEqual(cgroup.pids(), [burner.pid])
      cgroup.kill()
      await exited
    } finally {
      burner.kill('SIGKILL')
      await cgroup.remove()
    }
    for (const dir of dirs.values()) assert.equal(existsSync(dir), false, `${dir} removed`)
  })
})

describe('cgroup version in use', () => {
  // The suite above runs on whichever version this machine offers; say plainly which one was not exercised.
  it('cgroup v2 (memory.max, memory.events, cgroup.kill)', {
    skip:
      support.version === 2
        ? false
        : `this machine offers ${support.version === 1 ? 'v1' : 'no usable cgroups'}; the v2 path is covered by unit tests only here`,
  }, () => {
    assert.equal(support.version, 2)
  })
  it('cgroup v1 (memory.limit_in_bytes, memory.oom_control, pids.current)', {
    skip:
      support.version === 1
        ? false
        : `this machine offers ${support.version === 2 ? 'v2' : 'no usable cgroups'}`,
  }, () => {
    assert.equal(support.version, 1)
  })
})
