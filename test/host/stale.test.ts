// Leftovers of cordon processes that died mid-run, found by the owner pid in their names.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { LAUNCHER_PATH } from '../../src/host/native.js'
import { staleEntries } from '../../src/host/stale.js'
import { asUnprivileged, noLauncher, notRoot, noUnprivileged, tempDir, worldWritableDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const CAPS_LAUNCHER = LAUNCHER_PATH

/** A pid that just exited (reuse within the test is unlikely on a pid space this large). */
const deadPid = () => spawnSync('true').pid!

describe('staleEntries', () => {
  it('names owned by a dead pid, not a living one, not another prefix; at most once per 10 s', () => {
    const parent = tempDir('cordon-stale-')
    const dead = deadPid()
    for (const name of [`x-${dead}-a`, `x-${process.pid}-b`, 'x-notapid-c', `y-${dead}-d`, `x-${dead}`]) {
      mkdirSync(path.join(parent, name))
    }
    assert.deepEqual(staleEntries(parent, 'x-').sort(), [`x-${dead}`, `x-${dead}-a`])
    assert.deepEqual(staleEntries(parent, 'x-'), [], 'looked at again within 10 s')
    assert.deepEqual(staleEntries(parent, 'y-'), [`y-${dead}-d`], 'each prefix on its own')
  })

  it('a missing directory has none', () => {
    assert.deepEqual(staleEntries('/nonexistent/cordon', 'x-'), [])
  })
})

describe('private TMPDIRs of a dead cordon', { skip: noLauncher }, () => {
  // Not as root they are host directories of cordon's own uid; the next cordon's first process-tier run
  // removes a dead owner's (what it holds too, following none of its symlinks), and nobody else's.
  it("are removed, with what they hold, by the next process-tier run: only its own uid's", {
    skip: noUnprivileged(),
  }, async () => {
    const tmp = worldWritableDir()
    const dead = deadPid()
    const outside = tempDir('cordon-outside-', { mode: 0o777 })
    writeFileSync(path.join(outside, 'kept'), 'x')
    // Another uid's (root's when the test runs as root): never this cordon's to remove.
    const foreign = path.join(tmp, `cordon-tmp-${dead}-foreign`)
    if (process.getuid?.() === 0) mkdirSync(foreign)
    type Out = { left: string[]; outside: boolean }
    const out = await asUnprivileged<Out>(`
      const fs = await import('node:fs')
      const { spawnSync } = await import('node:child_process')
      const tmp = ${JSON.stringify(tmp)}
      fs.mkdirSync(tmp + '/cordon-tmp-${dead}-test/deep/er', { recursive: true })
      fs.writeFileSync(tmp + '/cordon-tmp-${dead}-test/deep/er/file', 'x')
      fs.symlinkSync(${JSON.stringify(outside)}, tmp + '/cordon-tmp-${dead}-test/deep/out')
      fs.mkdirSync(tmp + '/cordon-tmp-' + process.pid + '-mine')
      const r = spawnSync(process.execPath, [${JSON.stringify(CLI)}, 'run', '--isolation', 'process', '--', 'true'], {
        env: { ...process.env, TMPDIR: tmp },
      })
      if (r.status !== 0) throw new Error(String(r.stderr))
      const gone = () => !fs.existsSync(tmp + '/cordon-tmp-${dead}-test')
      for (let i = 0; i < 100 && !gone(); i++) await new Promise((r) => setTimeout(r, 50))
      return { left: fs.readdirSync(tmp).sort(), outside: fs.existsSync(${JSON.stringify(outside)} + '/kept') }
    `)
    assert.equal(out.outside, true, 'a file its symlink pointed to was deleted')
    assert.equal(
      out.left.includes(`cordon-tmp-${dead}-test`),
      false,
      `a dead owner's is still there: ${out.left}`,
    )
    assert.equal(
      out.left.some((n) => n.endsWith('-mine')),
      true,
      "a living owner's is kept",
    )
    if (process.getuid?.() === 0) assert.equal(existsSync(foreign), true, "another uid's is kept")
  })

  // As root the private TMPDIR is a tmpfs in the sandbox's own mount namespace: root never removes
  // anything under the host's TMPDIR, where any user can create names.
  it('as root, nothing under the host TMPDIR is swept', { skip: notRoot }, () => {
    const tmp = tempDir('cordon-tmp-', { mode: 0o1777 }) // /tmp alike, but no other cordon's to sweep
    const planted = path.join(tmp, `cordon-tmp-${deadPid()}-test`)
    mkdirSync(planted)
    try {
      spawnSync('chown', ['65534:65534', planted])
      const r = spawnSync(process.execPath, [CLI, 'run', '--isolation', 'process', '--', 'true'], {
        env: { ...process.env, TMPDIR: tmp },
      })
      assert.equal(r.status, 0, String(r.stderr))
      spawnSync('sleep', ['0.5'])
      assert.equal(existsSync(planted), true)
    } finally {
      spawnSync('rm', ['-rf', planted])
    }
  })
})

/**
 * Plants `<base>/a` (a directory with files) and flips it, at random moments, with a symlink to `target`:
 * a recursive delete that follows the symlink between its readdir and its unlinks deletes in `target`.
 * Runs for argv[3] seconds; with a fourth argument `base` is a directory whose `cordon-tmp-*` entries are
 * all flipped, over and over.
 */
export const FLIPPER = `
import os, random, sys, time
base, target, end = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
scan = len(sys.argv) > 4
def flip(base):
    a, held = os.path.join(base, "a"), os.path.join(base, "held")
    try:
        os.makedirs(os.path.join(a, "b", "c"), exist_ok=True)
        for i in range(8):
            open(os.path.join(a, "b", "c", "f%d" % i), "w").close()
            open(os.path.join(a, "victim" if i == 0 else "f%d" % i), "w").close()
        time.sleep(random.random() / 1000)
        os.rename(a, held)
        os.symlink(target, a)
        time.sleep(random.random() / 500)
        os.unlink(a)
        os.rename(held, a)
    except OSError:
        pass
while time.time() < end:
    if not scan:
        flip(base)
        continue
    try:
        names = [n for n in os.listdir(base) if n.startswith("cordon-tmp-")]
    except OSError:
        names = []
    for n in names:
        flip(os.path.join(base, n))
`

const NOBODY = { uid: 65534, gid: 65534 }

// The remover itself, against a directory flipped to a symlink and back under it, over and over.
describe('cordon-launch --remove-tree against a tree swapped mid-walk', { skip: noLauncher }, () => {
  it('never deletes beyond the symlink', async () => {
    const dir = tempDir('cordon-race-')
    const vault = tempDir('cordon-vault-')
    const victim = path.join(vault, 'victim')
    writeFileSync(victim, 'precious')
    const base = path.join(dir, 'tree')
    const flipper = spawn('/usr/bin/python3', ['-c', FLIPPER, base, vault, '60'], { stdio: 'ignore' })
    try {
      let removed = 0
      for (let i = 0; i < 300 && existsSync(victim); i++) {
        await new Promise((r) => setTimeout(r, 2))
        removed += spawnSync(CAPS_LAUNCHER, [`--remove-tree=${base}`]).status === 0 ? 1 : 0
      }
      assert.equal(existsSync(victim), true, 'the remover deleted beyond a symlink')
      assert.ok(removed > 0, 'it removed the tree at least once')
    } finally {
      flipper.kill('SIGKILL')
      await new Promise((r) => flipper.once('close', r))
    }
  })
})

// As root, nothing cordon removes may be reachable through a name another user controls: an unprivileged
// user plants a "private TMPDIR of a dead cordon" in /tmp and swaps one of its directories for a symlink
// into a root-only directory while fresh cordon processes sweep.
describe('the stale sweep, as root, against a planted tree', { skip: noLauncher || notRoot }, () => {
  it('never deletes through a symlink another user swaps in mid-walk', async () => {
    const vault = tempDir('cordon-vault-') // root's, 0700: the planter can neither read nor write it
    const victim = path.join(vault, 'victim')
    writeFileSync(victim, 'precious')
    // A TMPDIR like /tmp (world-writable, sticky) but this test's own: other cordon processes on this
    // machine sweep /tmp, and one of an older cordon would delete through the planted symlink as well.
    const tmp = tempDir('cordon-tmp-', { mode: 0o1777 })
    const base = path.join(tmp, `cordon-tmp-${deadPid()}-planted`)
    mkdirSync(base, { mode: 0o777 })
    spawnSync('chown', [`${NOBODY.uid}:${NOBODY.gid}`, base])
    const flipper = spawn('/usr/bin/python3', ['-c', FLIPPER, base, vault, '60'], {
      ...NOBODY,
      stdio: 'ignore',
    })
    try {
      // Each sweep in a fresh cordon process: a process sweeps at most once per 10 s.
      for (let i = 0; i < 30 && existsSync(victim); i++) {
        if (!existsSync(base)) {
          mkdirSync(base, { mode: 0o777 })
          spawnSync('chown', [`${NOBODY.uid}:${NOBODY.gid}`, base])
        }
        const r = spawnSync(process.execPath, [CLI, 'run', '--isolation', 'process', '--', 'true'], {
          env: { ...process.env, TMPDIR: tmp },
        })
        assert.equal(r.status, 0, String(r.stderr))
      }
      assert.equal(existsSync(victim), true, 'root deleted a file in a root-only directory')
    } finally {
      flipper.kill('SIGKILL')
      await new Promise((r) => flipper.once('close', r))
      spawnSync('rm', ['-rf', base])
    }
  })
})

// Not root: the sandbox runs as cordon's own uid, and Landlock alone keeps it to its write area. A sandbox
// given a writable directory that holds cordon's scratch (`--writable /tmp`) plants a "dead cordon's"
// TMPDIR there and flips directories of it, and of the live scratches of other runs, into a directory
// outside its write area, while fresh cordon processes sweep and remove their own scratch after each run.
describe('removing scratch trees, not as root', { skip: noLauncher || noUnprivileged() }, () => {
  it('a sandbox cannot steer cordon into deleting outside its Landlock write area', async () => {
    const shared = worldWritableDir()
    type Out = { victim: boolean; runs: number; left: string[]; errors: string[] }
    const out = await asUnprivileged<Out>(
      `
      const fs = await import('node:fs')
      const { spawnSync } = await import('node:child_process')
      const tmp = fs.mkdtempSync(${JSON.stringify(shared)} + '/tmp-')
      const vault = fs.mkdtempSync(${JSON.stringify(shared)} + '/vault-') // this user's, outside the sandbox's area
      fs.writeFileSync(vault + '/victim', 'precious')
      const dead = spawnSync('true').pid
      const planted = tmp + '/cordon-tmp-' + dead + '-planted'
      fs.mkdirSync(planted)
      process.env.TMPDIR = tmp // cordon's scratch goes here, and this is the sandbox's writable dir
      const flipper = start(['python3', '-c', ${JSON.stringify(FLIPPER)}, tmp, vault, '60', 'scan'], {
        isolation: 'process', writable: [tmp], limits: { wallTimeMs: 60000 },
      })
      const errors = []
      let runs = 0
      for (; runs < 25 && fs.existsSync(vault + '/victim'); runs++) {
        if (!fs.existsSync(planted)) fs.mkdirSync(planted)
        const fill = 'mkdir -p "$TMPDIR/a/b/c" && for i in 1 2 3 4 5 6 7 8; do touch "$TMPDIR/a/f$i" "$TMPDIR/a/b/c/f$i"; done 2>/dev/null; exit 0'
        const r = spawnSync(process.execPath, [${JSON.stringify(CLI)}, 'run', '--isolation', 'process', '--', 'sh', '-c', fill], {
          env: { ...process.env, TMPDIR: tmp }, encoding: 'utf8',
        })
        if (r.status !== 0) errors.push(r.stderr)
      }
      const victim = fs.existsSync(vault + '/victim')
      flipper.kill()
      await flipper.result
      return { victim, runs, left: fs.readdirSync(tmp), errors }
    `,
      120_000,
    )
    assert.deepEqual(out.errors, [], 'every run ends as its program did (no crash of cordon)')
    assert.equal(out.victim, true, `cordon deleted outside the sandbox's write area (after ${out.runs} runs)`)
  })
})

describe('a private TMPDIR swapped for a symlink by its sandbox, not as root', {
  skip: noLauncher || noUnprivileged(),
}, () => {
  it('goes as the symlink it is: nothing it points to is touched', async () => {
    const shared = worldWritableDir()
    type Out = { status: string; left: string[]; kept: boolean }
    const out = await asUnprivileged<Out>(`
      const fs = await import('node:fs')
      const tmp = fs.mkdtempSync(${JSON.stringify(shared)} + '/tmp-')
      const outside = fs.mkdtempSync(${JSON.stringify(shared)} + '/outside-')
      fs.mkdirSync(outside + '/sub')
      fs.writeFileSync(outside + '/sub/kept', 'x')
      process.env.TMPDIR = tmp
      const swap = 'mv "$TMPDIR" "$TMPDIR.moved" && ln -s "$1" "$TMPDIR"'
      const r = await run(['sh', '-c', swap, 'sh', outside], { isolation: 'process', writable: [tmp] })
      return { status: r.status, left: fs.readdirSync(tmp), kept: fs.existsSync(outside + '/sub/kept') }
    `)
    // The TMPDIR is a tmpfs mounted in the sandbox's own namespace now: the swap fails (a mount point
    // cannot be renamed) and the run ends as its program did; had it worked, cordon removing the link
    // must still touch nothing it points to.
    assert.ok(['ok', 'nonzero-exit'].includes(out.status), out.status)
    assert.equal(out.kept, true)
    // What the sandbox renamed its TMPDIR to is its own doing, in its writable directory; the name
    // cordon made is gone.
    assert.deepEqual(
      out.left.filter((n) => !n.endsWith('.moved')),
      [],
    )
  })
})
