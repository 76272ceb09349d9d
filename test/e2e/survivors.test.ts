// When run() resolves nothing of the sandbox is left, whatever the program did to escape.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { run, start } from '../../src/index.js'
import {
  leftBehind,
  marker,
  noLauncher,
  noSpawner,
  notRoot,
  noUnprivileged,
  processesWith,
  skipTier,
  TIERS,
  waitFor,
  worldWritableDir,
} from '../helpers.js'

/** `promise`'s value, or a failure saying `why` when it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, why: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new assert.AssertionError({ message: why })), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const LIBRARY = fileURLToPath(new URL('../../dist/index.js', import.meta.url))

for (const tier of TIERS) {
  describe(`no survivors (${tier} tier)`, { skip: skipTier(tier) || (tier === 'process' && notRoot) }, () => {
    it('setsid, nohup and double-forked children are gone when run() resolves', async () => {
      const m = marker()
      const script = `setsid sleep ${m} & nohup sleep ${m} >/dev/null 2>&1 & (sleep ${m} &) ; sh -c "sleep ${m} &" ; echo spawned`
      const r = await run(['sh', '-c', script], { isolation: tier })
      assert.equal(r.status, 'ok')
      assert.equal(r.stdout, 'spawned\n')
      assert.deepEqual(processesWith(m), [])
    })

    it('escapees are gone after a timeout too', async () => {
      const m = marker()
      const r = await run(['sh', '-c', `setsid sleep ${m} & sleep ${m}`], {
        isolation: tier,
        limits: { wallTimeMs: 300, killGraceMs: 200 },
      })
      assert.equal(r.status, 'timeout')
      assert.deepEqual(processesWith(m), [])
    })
  })
}

// Without a cgroup the process tier finds its processes by the sandbox's own uid. A process that makes
// itself non-dumpable turns its /proc/<pid>/* files root's; the scan reads the /proc/<pid> directory's
// owner, which the kernel keeps at the process's uid for just this use.
describe('no survivors (process tier, by uid alone: cgroup off)', {
  skip: skipTier('process') || notRoot,
}, () => {
  it('setsid and non-dumpable children are gone when run() resolves', async () => {
    const m = marker()
    const hide = `import ctypes, os, time
if os.fork() == 0:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    os.setsid()
    time.sleep(float("${m}"))
`
    const r = await run(['sh', '-c', `setsid sleep ${m} & python3 -c '${hide}' ${m}; echo spawned`], {
      isolation: 'process',
      cgroup: { mode: 'off' },
    })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, 'spawned\n')
    assert.deepEqual(processesWith(m), [])
  })
})

// bwrap arms --die-with-parent in its init only after the clone: a monitor killed before that leaves the init
// running, re-parented and holding the output pipes. Kills land across the whole set-up (0–2 ms after start).
describe('launcher killed from outside during set-up', () => {
  for (const tier of TIERS) {
    for (const mode of ['auto', 'off'] as const) {
      it(`ends the run and leaves nothing (${tier} tier, cgroup ${mode})`, {
        skip: skipTier(tier),
      }, async () => {
        for (let i = 0; i < 20; i++) {
          const m = marker()
          const handle = start(['sleep', m], {
            isolation: tier,
            cgroup: { mode },
            limits: { wallTimeMs: 20_000, killGraceMs: 100 },
          })
          const spinUntil = performance.now() + (i % 10) * 0.2
          while (performance.now() < spinUntil);
          process.kill(handle.pid!, 'SIGKILL')
          const r = await within(
            handle.result,
            10_000,
            `run ${i} still open 10 s after its launcher was killed`,
          )
          assert.equal(r.status, 'signaled', `run ${i}: ${r.violation?.message}`)
          assert.ok(r.wallMs < 5_000, `run ${i} ended by its wall limit (${r.wallMs} ms), not by the kill`)
          assert.deepEqual(processesWith(m), [], `run ${i} left processes`)
        }
      })
    }
  }
})

// A process outside the sandbox (another uid, cordon cannot count it as the sandbox's) is handed the
// sandbox's stdout over a unix socket and keeps it open: run() must still end soon after its program.
const HOLDER = `
import os, socket, sys, time
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); srv.listen(1)
print('ready', flush=True)
conn, _ = srv.accept()
msg, fds, _, _ = socket.recv_fds(conn, 1, 4)
time.sleep(float(sys.argv[2]))
`
const SENDER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1])
socket.send_fds(s, [b'x'], [1, 2])
print('sent', flush=True)
`

describe('output pipes held open outside the sandbox', () => {
  for (const tier of TIERS) {
    it(`do not keep run() open (${tier} tier)`, { skip: skipTier(tier) }, async () => {
      const dir = worldWritableDir()
      const socketPath = path.join(dir, 'holder.sock')
      const holder = spawn('python3', ['-c', HOLDER, socketPath, '60'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      try {
        await new Promise((resolve) => holder.stdout.once('data', resolve))
        const started = performance.now()
        const r = await within(
          run(['python3', '-c', SENDER, socketPath], { isolation: tier, writable: [dir] }),
          20_000,
          'run() still open 20 s after its program ended',
        )
        assert.equal(r.status, 'ok', r.stderr)
        assert.equal(r.stdout, 'sent\n')
        assert.ok(performance.now() - started < 10_000, 'run() ended soon after its program')
      } finally {
        holder.kill('SIGKILL')
      }
    })
  }
})

describe('host killed with SIGKILL', () => {
  // Started by a fork of the host, or by a spawner (which dies with the host, and its sandboxes with it).
  const cases = [
    { tier: 'process', mode: 'auto', spawner: false },
    { tier: 'process', mode: 'off', spawner: false },
    { tier: 'process', mode: 'auto', spawner: true },
    { tier: 'namespace', mode: 'auto', spawner: true },
  ] as const
  for (const { tier, mode, spawner } of cases) {
    const via = spawner ? ', through a spawner' : ''
    it(`takes a ${tier}-tier sandbox with it, children that left its session too (cgroup ${mode}${via})`, {
      skip: skipTier(tier) || (tier === 'process' && notRoot) || (spawner && noSpawner),
    }, async () => {
      const m = marker()
      const runDir = () => (existsSync('/run/cordon') ? readdirSync('/run/cordon').sort() : [])
      const runBefore = runDir()
      // A setsid'd child no longer has the launched process's session; the marker arrives as $1, so only
      // the two sleeps have it after "sleep " or "1000 " in their command lines.
      const script = 'setsid sleep 1000 "$1" & exec sleep "$1"'
      const options = JSON.stringify({ isolation: tier, cgroup: { mode } })
      const host = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { openSpawner, run } from ${JSON.stringify(LIBRARY)}
const options = { ...${options}, ${spawner ? 'spawner: await openSpawner()' : ''} }
await run(['sh', '-c', ${JSON.stringify(script)}, 'sh', process.argv[1]], options)`,
          m,
        ],
        { stdio: 'ignore' },
      )
      const started = () =>
        processesWith(`1000 ${m}`).length === 1 && processesWith(`sleep ${m}`).length === 1
      assert.ok(await waitFor(started, 10_000), 'both started')
      host.kill('SIGKILL')
      assert.ok(await waitFor(() => processesWith(m).length === 0, 10_000), 'all died with their host')
      // And what the run made goes too, as cordon would have removed it: its cgroup, its private TMPDIR.
      // (bwrap has no hook for the namespace tier's cgroup: the next cordon sweeps it.)
      const left = () => leftBehind(host.pid!)
      if (tier === 'process') {
        assert.ok(await waitFor(() => left().length === 0, 5000), `left behind: ${left().join(' ')}`)
        // As root the private TMPDIR is a tmpfs in the sandbox's own mount namespace: nothing on the host.
        assert.deepEqual(
          runDir().filter((e) => !runBefore.includes(e)),
          [],
          'left in /run/cordon',
        )
      }
    })
  }

  for (const tier of TIERS) {
    it(`takes its ${tier}-tier sandbox with it`, { skip: skipTier(tier) }, async () => {
      const m = marker()
      const host = spawn(process.execPath, [CLI, 'run', '--isolation', tier, '--', 'sleep', m], {
        stdio: 'ignore',
      })
      assert.ok(await waitFor(() => processesWith(m).length > 0, 10_000), 'sandbox started')
      host.kill('SIGKILL')
      assert.ok(await waitFor(() => processesWith(m).length === 0, 10_000), 'sandbox died with its host')
    })
  }
})

// Not as root the private TMPDIR is a host directory: the monitor removes it, with what the sandbox left
// there, when the host dies mid-run.
describe('host killed with SIGKILL, not as root', { skip: noLauncher || noUnprivileged() }, () => {
  it('the monitor removes the private TMPDIR and what it holds', async () => {
    const tmp = mkdtempSync(path.join(worldWritableDir(), 'tmp-'))
    const nobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {}
    if (process.getuid?.() === 0) spawnSync('chown', ['65534:65534', tmp])
    const m = marker()
    const script =
      'mkdir -p "$TMPDIR/a/b" && touch "$TMPDIR/a/b/f" && ln -s / "$TMPDIR/root" && exec sleep "$1"'
    const host = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { run } from ${JSON.stringify(LIBRARY)}
await run(['sh', '-c', ${JSON.stringify(script)}, 'sh', process.argv[1]], { isolation: 'process' })`,
        m,
      ],
      {
        stdio: 'ignore',
        cwd: tmp,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: tmp },
        ...nobody,
      },
    )
    const scratch = () => readdirSync(tmp).filter((e) => e.startsWith('cordon-tmp-'))
    assert.ok(await waitFor(() => processesWith(`sleep ${m}`).length === 1, 10_000), 'started')
    assert.equal(scratch().length, 1, 'its private TMPDIR is there')
    host.kill('SIGKILL')
    assert.ok(await waitFor(() => processesWith(m).length === 0, 10_000), 'all died with their host')
    assert.ok(await waitFor(() => scratch().length === 0, 5000), `left behind: ${scratch().join(' ')}`)
  })
})
