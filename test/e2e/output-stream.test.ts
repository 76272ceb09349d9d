// Output through real pipes: both streams read at once, live chunks, exact bytes, split characters.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { describe, it } from 'node:test'
import { type OutputChunk, run, start } from '../../src/index.js'
import { marker, processesWith, skipTier, TIERS } from '../helpers.js'

for (const tier of TIERS) {
  describe(`output (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier

    it('a program that floods stderr and never writes stdout does not deadlock', async () => {
      const r = await run(['sh', '-c', 'head -c 3000000 /dev/zero | tr "\\0" e >&2; echo done'], {
        isolation,
        limits: { maxOutputBytes: '4M' },
      })
      assert.equal(r.status, 'ok')
      assert.equal(r.stderr.length, 3_000_000)
      assert.equal(r.stdout, 'done\n')
      assert.equal(r.outputBytes, 3_000_005)
    })

    it('an onOutput or onLog that throws rejects run() with its error, and the sandbox is gone', async () => {
      for (const hook of ['onOutput', 'onLog'] as const) {
        const m = marker()
        const script = `echo '{"msg":"hi"}' >&$CORDON_LOG_FD; echo a; sleep ${m}`
        const started = performance.now()
        await assert.rejects(
          run(['sh', '-c', script], {
            isolation,
            [hook]: () => {
              throw new Error(`${hook} failed`)
            },
          }),
          new RegExp(`${hook} failed`),
        )
        assert.ok(performance.now() - started < 10_000, `${hook}: stopped, not run out`)
        assert.deepEqual(processesWith(m), [], `${hook}: nothing of the sandbox is left`)
      }
    })

    it('one budget for both streams, cut at the exact byte', async () => {
      const r = await run(['sh', '-c', 'printf 1234567890; printf abcdefghij >&2; sleep 0.2; printf XYZ'], {
        isolation,
        limits: { maxOutputBytes: 22 },
      })
      assert.equal(r.status, 'output-limit')
      assert.equal(r.outputBytes, 22)
      assert.equal(r.stdout.length + r.stderr.length, 22)
      assert.equal(r.output, '1234567890abcdefghijXY')
    })

    it('a multi-byte character split across writes decodes whole', async () => {
      const r = await run(['sh', '-c', "printf '\\342'; sleep 0.2; printf '\\202\\254\\n'"], { isolation })
      assert.equal(r.stdout, '€\n')
    })

    it('onOutput sees chunks live, in arrival order, before the program ends', async () => {
      const chunks: OutputChunk[] = []
      let firstAt = 0
      const t0 = Date.now()
      const r = await run(['sh', '-c', 'echo first; echo oops >&2; sleep 0.5; echo last'], {
        isolation,
        onOutput: (c) => {
          firstAt ||= Date.now() - t0
          chunks.push(c)
        },
      })
      assert.ok(firstAt < r.wallMs, `first chunk at ${firstAt} ms, run took ${r.wallMs} ms`)
      assert.deepEqual(
        chunks.map((c) => [c.stream, c.data]),
        [
          ['stdout', 'first\n'],
          ['stderr', 'oops\n'],
          ['stdout', 'last\n'],
        ],
      )
      assert.equal(r.output, 'first\noops\nlast\n')
    })

    it('start(): pid, live output iterator, stdin write and close', async () => {
      const handle = start(['sh', '-c', 'read line; echo "got $line"; cat'], { isolation })
      assert.ok(typeof handle.pid === 'number', "typeof handle.pid === 'number'")
      handle.write('hello\n')
      const seen: string[] = []
      for await (const chunk of handle.output) {
        seen.push(chunk.data)
        if (chunk.data.includes('got hello')) handle.closeStdin()
      }
      const r = await handle.result
      assert.equal(r.status, 'ok')
      assert.equal(seen.join(''), 'got hello\n')
    })

    it('stdin: text, Buffer, and EOF by default', async () => {
      assert.equal((await run(['cat'], { isolation, stdin: 'abc' })).stdout, 'abc')
      assert.equal((await run(['cat'], { isolation, stdin: Buffer.from('xyz') })).stdout, 'xyz')
      const eof = await run(['cat'], { isolation, limits: { wallTimeMs: 5000 } })
      assert.equal(eof.status, 'ok')
    })

    it('a Readable stdin the program does not read to its end is destroyed when the run ends', async () => {
      const stdin = new PassThrough()
      stdin.write('more than the program reads\n')
      const r = await run(['true'], { isolation, stdin })
      assert.equal(r.status, 'ok')
      assert.ok(
        stdin.destroyed,
        "the caller's stream is not left open (a file or socket behind it would leak)",
      )
      const read = new PassThrough()
      read.end('all of it\n')
      assert.equal((await run(['cat'], { isolation, stdin: read })).stdout, 'all of it\n')
    })

    it('without stdin, run() gives the sandbox /dev/null (no pipe to make and close); start() a pipe', async () => {
      const stdin = ['readlink', '/proc/self/fd/0']
      assert.equal((await run(stdin, { isolation })).stdout, '/dev/null\n')
      // A pipe through a spawner (the default one, once open), a socketpair from a fork of the host.
      assert.match((await run(stdin, { isolation, stdin: '' })).stdout, /^(pipe|socket):/)
      const handle = start(stdin, { isolation })
      handle.closeStdin()
      assert.match((await handle.result).stdout, /^(pipe|socket):/)
    })
  })
}
