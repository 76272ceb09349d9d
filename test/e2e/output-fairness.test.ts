// Two streams flooding at once under the output cap: each keeps a fair part of what it wrote before the
// cap stopped the sandbox, however the reads of the two pipes happen to fall.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { run } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

/**
 * Two processes that start flooding at the same instant (a barrier: both wait on one pipe), one on stdout
 * and one on stderr, in 64 KiB writes, until the sandbox is stopped. Each writes `first` bytes before the
 * barrier, so both have written when the flood begins (a process the machine starts late wrote nothing
 * before the cap, and is owed nothing).
 */
const flood = (first: number) =>
  [
    'import os',
    'ready_r, ready_w = os.pipe()',
    'go_r, go_w = os.pipe()',
    'for fd, byte in ((1, b"o"), (2, b"e")):',
    '    if os.fork() == 0:',
    '        os.close(go_w)',
    `        if ${first}: os.write(fd, byte * ${first})`,
    '        os.write(ready_w, b"x")',
    '        os.read(go_r, 1)',
    '        block = byte * 65536',
    '        while True: os.write(fd, block)',
    'os.read(ready_r, 1); os.read(ready_r, 1)',
    'os.close(go_w)',
    'os.wait(); os.wait()',
  ].join('\n')

const shares = (r: { stdout: string; stderr: string }) =>
  `stdout ${r.stdout.length}, stderr ${r.stderr.length}`

for (const tier of TIERS) {
  describe(`output fairness (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier

    // Reads of the two pipes in turns: each keeps about half, however long one could be read alone. Turns
    // share the reads, not the CPU: a writer the scheduler leaves waiting writes nothing for milliseconds
    // (here, 2 cores, three runnable processes: in the process tier up to two rounds in five kept less
    // than a quarter of one stream, some 1%), and is owed nothing for them. So one round in five that keeps
    // a fifth of each is asked for; without turns no round can (libuv reads one pipe up to 32 times).
    for (const cap of [1024 * 1024, 4 * 1024 * 1024]) {
      it(`both streams flooding under a ${cap / 1024} KiB cap each keep at least a fifth of it`, async () => {
        const seen: string[] = []
        for (let round = 0; round < 5; round++) {
          const r = await run(['python3', '-c', flood(8192)], { isolation, limits: { maxOutputBytes: cap } })
          assert.equal(r.status, 'output-limit')
          assert.equal(r.outputBytes, cap)
          assert.equal(r.stdout.length + r.stderr.length, cap)
          assert.match(r.stdout, /^o*$/)
          assert.match(r.stderr, /^e*$/)
          seen.push(shares(r))
          if (r.stdout.length >= cap / 5 && r.stderr.length >= cap / 5) return
        }
        assert.fail(`no round kept a fifth of each: ${seen.join('; ')}`)
      })
    }

    // One read (64 KiB) can go past a small cap at once: the room it would have taken alone is shared with
    // what the other stream wrote before the stop. Whether the other had written by then is up to how the
    // machine schedules the two writers (microseconds apart), so one fair round in five is asked for; without
    // the shared room none can be (the first flood read takes all 48 KiB).
    it('both flooding under a 64 KiB cap, after 8 KiB each: the room left is shared', async () => {
      const cap = 64 * 1024
      const seen: string[] = []
      for (let round = 0; round < 5; round++) {
        const r = await run(['python3', '-c', flood(8192)], { isolation, limits: { maxOutputBytes: cap } })
        assert.equal(r.status, 'output-limit')
        assert.equal(r.stdout.length + r.stderr.length, cap)
        seen.push(shares(r))
        if (r.stdout.length >= (cap * 3) / 8 && r.stderr.length >= (cap * 3) / 8) return
      }
      assert.fail(`no round shared the room: ${seen.join('; ')}`)
    })

    // sh starts the two `yes` a fork and an exec apart, milliseconds on a busy machine, which the one that
    // starts first keeps: one fair round in three.
    it("the issue's case, `yes out & yes err >&2` under 4 MiB, keeps a fair part of both", async () => {
      const cap = 4 * 1024 * 1024
      const seen: string[] = []
      for (let round = 0; round < 3; round++) {
        const r = await run(['sh', '-c', 'yes out & yes err >&2; wait'], {
          isolation,
          limits: { maxOutputBytes: cap },
        })
        assert.equal(r.status, 'output-limit')
        seen.push(shares(r))
        if (r.stdout.length >= cap / 5 && r.stderr.length >= cap / 5) return
      }
      assert.fail(`no round was fair: ${seen.join('; ')}`)
    })
  })
}
