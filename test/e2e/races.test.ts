// Paths judged in one place and used in another (TOCTOU), attacked the way a concurrent sandbox would: a
// process of another uid flips a path component between a real directory and something else in a tight
// loop (renameat2 RENAME_EXCHANGE, atomic) while many runs start. A run may be refused ("changed while it
// was checked", a planted symlink, a launch error); it must never act on the swapped-in target.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { chmodSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { PolicyError, type RunResult, run } from '../../src/index.js'
import { notRoot, skipTier, TIERS, tempDir } from '../helpers.js'

const RUNS = 60

/**
 * Exchange `a` and `b` (atomically, both stay present) in a loop, as uid 65534, holding each state for
 * up to 2 ms (a tight loop alone makes nearly every walk see both states, and every run refused); when
 * `plant` is given, first make `b` a symlink to it, owned by that uid (as a sandbox would have left it).
 */
const FLIPPER = `
import ctypes, os, random, sys, time
a, b = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3: os.symlink(sys.argv[3], b)
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
A, B = a.encode(), b.encode()
print('ready', flush=True)
while True:
    if libc.renameat2(-100, A, -100, B, 2) != 0:
        sys.exit('renameat2: ' + os.strerror(ctypes.get_errno()))
    time.sleep(random.random() * 0.002)
`

const flippers: ChildProcess[] = []
after(() => {
  for (const f of flippers) f.kill('SIGKILL')
})

async function flip(a: string, b: string, plant?: string): Promise<ChildProcess> {
  const child = spawn('python3', ['-c', FLIPPER, a, b, ...(plant ? [plant] : [])], {
    uid: 65534,
    gid: 65534,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  flippers.push(child)
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve())
    child.once('exit', (code) => reject(new Error(`the flipper exited (${code})`)))
  })
  return child
}

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGKILL')
  })

/**
 * Runs `once` RUNS times, two at a time; a PolicyError counts as a refusal. With `enough`, goes on (up to
 * 4 × RUNS) until it holds: on a loaded machine a run sees the flipped state far more often, and a test
 * that wants some run to have started must not fail on that alone.
 */
async function many(
  once: (i: number) => Promise<RunResult>,
  enough: (out: (RunResult | PolicyError)[]) => boolean = () => true,
): Promise<(RunResult | PolicyError)[]> {
  const out: (RunResult | PolicyError)[] = []
  for (let i = 0; i < RUNS || (i < 4 * RUNS && !enough(out)); i += 2) {
    const pair = await Promise.allSettled([once(i), once(i + 1)])
    for (const p of pair) {
      if (p.status === 'fulfilled') out.push(p.value)
      else if (p.reason instanceof PolicyError) out.push(p.reason)
      else throw p.reason
    }
  }
  return out
}

describe('paths judged and used are the same (a concurrent swapper)', { skip: notRoot }, () => {
  for (const isolation of TIERS) {
    it(`${isolation}: a writable path never binds the directory swapped in for a component`, {
      skip: skipTier(isolation),
    }, async () => {
      // base/sw is a real directory holding data/; base/alt a symlink (uid 65534's) to a directory that
      // holds a data/ of its own, hidden from the sandbox. They trade places all the time.
      const base = tempDir('cordon-race-', { mode: 0o777, parent: '/var/tmp' })
      const secret = tempDir('cordon-race-hidden-', { mode: 0o755, parent: '/var/tmp' })
      mkdirSync(path.join(base, 'sw', 'data'), { recursive: true })
      chmodSync(path.join(base, 'sw'), 0o777)
      chmodSync(path.join(base, 'sw', 'data'), 0o777)
      mkdirSync(path.join(secret, 'data'), { mode: 0o777 })
      chmodSync(path.join(secret, 'data'), 0o777)
      writeFileSync(path.join(secret, 'data', 'key'), 'secret')
      const flipper = await flip(path.join(base, 'sw'), path.join(base, 'alt'), secret)
      // The sandbox writes through both names: one of them is the directory its bind landed in.
      const write = `for n in sw alt; do echo x > ${base}/$n/data/pwned-$$ 2>/dev/null; done; true`
      const results = await many(
        () =>
          run(['sh', '-c', write], {
            isolation,
            cwd: '/',
            writable: [path.join(base, 'sw', 'data')],
            // The process tier has no mount namespace to hide it in; Landlock keeps its writes out.
            ...(isolation === 'namespace' ? { hide: [secret] } : {}),
            limits: { wallTimeMs: '10s' },
          }),
        (out) => out.some((r) => !(r instanceof PolicyError) && r.status === 'ok'),
      )
      await stop(flipper)
      const pwned = readdirSync(path.join(secret, 'data')).filter((f) => f.startsWith('pwned'))
      const refused = results.filter((r) => r instanceof PolicyError)
      const ran = results.filter((r) => !(r instanceof PolicyError) && r.status === 'ok')
      const summary = new Map<string, number>()
      for (const r of results) {
        const key =
          r instanceof PolicyError
            ? r.message.replace(/\/\S+/g, 'P')
            : `${r.status} ${r.violation?.message ?? ''}`
        summary.set(key, (summary.get(key) ?? 0) + 1)
      }
      assert.deepEqual(
        pwned,
        [],
        `writes landed in the hidden directory (${pwned.length} of ${results.length} runs)`,
      )
      for (const r of refused)
        assert.match(r.message, /changed while it was checked|symlink owned by uid 65534|does not exist/)
      assert.ok(ran.length > 0, `no run started: ${[...summary].join('; ')}`)
    })

    it(`${isolation}: --allow /usr/bin/true never executes the binary swapped in for it`, {
      skip: skipTier(isolation),
    }, async () => {
      // base/sw/prog -> /usr/bin/true and base/alt/prog -> /usr/bin/id; the directories trade places.
      const base = tempDir('cordon-race-', { mode: 0o777, parent: '/var/tmp' })
      for (const [dir, target] of [
        ['sw', '/usr/bin/true'],
        ['alt', '/usr/bin/id'],
      ] as const) {
        mkdirSync(path.join(base, dir))
        symlinkSync(target, path.join(base, dir, 'prog'))
      }
      const flipper = await flip(path.join(base, 'sw'), path.join(base, 'alt'))
      const results = await many(() =>
        run([path.join(base, 'sw', 'prog')], {
          isolation,
          cwd: '/',
          allow: ['/usr/bin/true'],
          limits: { wallTimeMs: '10s' },
        }),
      )
      await stop(flipper)
      const ranId = results.filter((r) => !(r instanceof PolicyError) && /uid=/.test(r.stdout))
      assert.equal(ranId.length, 0, `the allow list let /usr/bin/id run in ${ranId.length} of ${RUNS} runs`)
      for (const r of results) {
        assert.ok(!(r instanceof PolicyError), String(r))
        assert.ok(['ok', 'denied'].includes(r.status), `${r.status}: ${r.violation?.message} ${r.stderr}`)
      }
    })
  }
})
