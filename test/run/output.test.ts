import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { OutputChunk } from '../../src/policy/schema.js'
import { OutputBuffer } from '../../src/run/output.js'
import { prng } from '../helpers.js'

function buffer(cap: number): { out: OutputBuffer; chunks: OutputChunk[] } {
  const chunks: OutputChunk[] = []
  return { out: new OutputBuffer(cap, (chunk) => chunks.push(chunk)), chunks }
}
const b = (text: string) => Buffer.from(text)

/** Up to 40 random pieces of `alphabet`, cut into 1-6 byte pushes (a third on stderr), and a cap near their size. */
function randomPushes(rand: () => number, alphabet: readonly Buffer[]) {
  const pick = (n: number) => Math.floor(rand() * n)
  const bytes = Buffer.concat(Array.from({ length: pick(40) }, () => alphabet[pick(alphabet.length)]!))
  const pushes: [OutputChunk['stream'], Buffer][] = []
  for (let at = 0; at < bytes.length; ) {
    const len = 1 + pick(6)
    pushes.push([pick(3) === 0 ? 'stderr' : 'stdout', bytes.subarray(at, at + len)])
    at += len
  }
  return { pushes, cap: 1 + pick(bytes.length + 5) }
}
const EURO = Buffer.from('€') // e2 82 ac

describe('OutputBuffer', () => {
  it('keeps everything under the cap', () => {
    const { out, chunks } = buffer(100)
    assert.equal(out.push('stdout', b('hello ')), true)
    assert.equal(out.push('stderr', b('warn')), true)
    assert.equal(out.push('stdout', b('world')), true)
    assert.equal(out.bytes, 15)
    assert.equal(out.truncated, false)
    assert.deepEqual(out.finish(), { stdout: 'hello world', stderr: 'warn', output: 'hello warnworld' })
    assert.equal(chunks.length, 3)
  })

  it('shares one budget across stdout and stderr', () => {
    const { out } = buffer(10)
    assert.equal(out.push('stdout', b('aaaaaa')), true)
    assert.equal(out.push('stderr', b('bbbbbb')), false)
    assert.equal(out.bytes, 10)
    assert.equal(out.truncated, true)
    assert.deepEqual(out.finish(), { stdout: 'aaaaaa', stderr: 'bbbb', output: 'aaaaaabbbb' })
  })

  it('filling the cap exactly is not truncation', () => {
    const { out } = buffer(5)
    assert.equal(out.push('stdout', b('12345')), true)
    assert.equal(out.bytes, 5)
    assert.equal(out.truncated, false)
    assert.equal(out.finish().stdout, '12345')
  })

  it('cuts exactly at the cap', () => {
    const { out } = buffer(7)
    assert.equal(out.push('stdout', b('0123')), true)
    assert.equal(out.push('stdout', b('456789')), false)
    assert.equal(out.bytes, 7)
    assert.equal(out.truncated, true)
    assert.equal(out.finish().stdout, '0123456')
  })

  it('returns false for every push past the cap and keeps nothing more', () => {
    const { out, chunks } = buffer(4)
    out.push('stdout', b('1234'))
    assert.equal(out.push('stdout', b('5')), false)
    assert.equal(out.truncated, true)
    const seen = chunks.length
    assert.equal(out.push('stdout', b('more')), false)
    assert.equal(out.push('stderr', b('even more')), false)
    assert.equal(chunks.length, seen)
    assert.equal(out.bytes, 4)
    assert.deepEqual(out.finish(), { stdout: '1234', stderr: '', output: '1234' })
  })

  it('a cap of zero keeps nothing', () => {
    const { out, chunks } = buffer(0)
    assert.equal(out.push('stdout', b('x')), false)
    assert.equal(out.bytes, 0)
    assert.deepEqual(out.finish(), { stdout: '', stderr: '', output: '' })
    assert.deepEqual(chunks, [])
  })

  it('decodes a 3-byte character split across two pushes whole, in the later chunk', () => {
    const { out, chunks } = buffer(100)
    out.push('stdout', Buffer.concat([b('a'), EURO.subarray(0, 1)]))
    out.push('stdout', Buffer.concat([EURO.subarray(1), b('b')]))
    assert.deepEqual(
      chunks.map((c) => c.data),
      ['a', '€b'],
    )
    assert.equal(out.bytes, 5)
    assert.deepEqual(out.finish(), { stdout: 'a€b', stderr: '', output: 'a€b' })
  })

  it('decodes a character split byte by byte', () => {
    const { out, chunks } = buffer(100)
    for (const byte of EURO) out.push('stderr', Buffer.from([byte]))
    assert.deepEqual(
      chunks.map((c) => [c.stream, c.data]),
      [['stderr', '€']],
    )
    assert.equal(out.finish().stderr, '€')
  })

  it('decodes each stream separately', () => {
    const { out } = buffer(100)
    out.push('stdout', EURO.subarray(0, 2))
    out.push('stderr', b('x'))
    out.push('stdout', EURO.subarray(2))
    assert.deepEqual(out.finish(), { stdout: '€', stderr: 'x', output: 'x€' })
  })

  it('turns a character cut at the cap into U+FFFD', () => {
    const { out } = buffer(2)
    assert.equal(out.push('stdout', EURO), false)
    assert.equal(out.bytes, 2)
    assert.equal(out.finish().stdout, '\uFFFD')
  })

  it('keeps stdout and stderr interleaved in arrival order in output', () => {
    const { out } = buffer(100)
    out.push('stdout', b('1'))
    out.push('stderr', b('2'))
    out.push('stdout', b('3'))
    out.push('stderr', b('4'))
    out.push('stderr', b('5'))
    out.push('stdout', b('6'))
    assert.deepEqual(out.finish(), { stdout: '136', stderr: '245', output: '123456' })
  })

  it('calls onChunk with the stream, the text and the bytes kept', () => {
    const { out, chunks } = buffer(8)
    out.push('stdout', b('abc'))
    out.push('stderr', b('de'))
    out.push('stdout', b('fghij'))
    out.finish()
    // What went past the cap comes out at the end, once both streams' parts of the room are known.
    assert.deepEqual(chunks, [
      { stream: 'stdout', data: 'abc', bytes: 3 },
      { stream: 'stderr', data: 'de', bytes: 2 },
      { stream: 'stdout', data: 'fgh', bytes: 3 },
    ])
  })

  it('does not call onChunk for an empty push', () => {
    const { out, chunks } = buffer(8)
    assert.equal(out.push('stdout', Buffer.alloc(0)), true)
    out.finish()
    assert.deepEqual(chunks, [])
  })

  it('onChunk byte counts add up to the bytes kept', {}, () => {
    const { out, chunks } = buffer(100)
    out.push('stdout', EURO.subarray(0, 1))
    out.push('stdout', EURO.subarray(1))
    out.finish()
    assert.equal(
      chunks.reduce((sum, c) => sum + c.bytes, 0),
      out.bytes,
    )
  })

  it('keeps the stderr tail past the cap', () => {
    const { out } = buffer(4)
    out.push('stderr', b('start'))
    out.push('stdout', b('ignored'))
    out.push('stderr', b('\nMemoryError\n'))
    assert.equal(out.truncated, true)
    assert.equal(out.stderrTail, 'start\nMemoryError\n')
    // The room left (all 4 bytes) is shared: half each.
    assert.deepEqual(out.finish(), { stdout: 'ig', stderr: 'st', output: 'stig' })
  })

  it('keeps only stderr in the tail', () => {
    const { out } = buffer(100)
    out.push('stdout', b('out'))
    out.push('stderr', b('err'))
    assert.equal(out.stderrTail, 'err')
  })

  it('bounds the stderr tail to its last 4096 characters', () => {
    const { out } = buffer(10)
    out.push('stderr', Buffer.alloc(10_000, 'x'))
    out.push('stderr', b('Cannot fork'))
    assert.equal(out.stderrTail.length, 4096)
    assert.ok(out.stderrTail.endsWith('xCannot fork'), "out.stderrTail.endsWith('xCannot fork')")
    for (let i = 0; i < 100; i++) out.push('stderr', Buffer.alloc(1000, 'y'))
    assert.equal(out.stderrTail, 'y'.repeat(4096))
  })
})

describe('OutputBuffer without a live consumer (batched decoding)', () => {
  const batched = (cap: number) => new OutputBuffer(cap, () => {}, [], { live: false })

  it('keeps arrival order across streams and the exact cap', () => {
    const out = batched(12)
    assert.equal(out.push('stdout', b('ab')), true)
    assert.equal(out.push('stdout', b('cd')), true)
    assert.equal(out.push('stderr', b('EF')), true)
    assert.equal(out.push('stdout', b('gh')), true)
    assert.equal(out.push('stderr', b('IJKLMN')), false)
    assert.equal(out.bytes, 12)
    assert.deepEqual(out.finish(), { stdout: 'abcdgh', stderr: 'EFIJKL', output: 'abcdEFghIJKL' })
  })

  it('a character split across pushes survives, and ASCII after it is not mangled', () => {
    const out = batched(100)
    out.push('stdout', Buffer.concat([b('a'), EURO.subarray(0, 1)]))
    out.push('stdout', EURO.subarray(1))
    out.push('stdout', b('xyz'))
    out.push('stdout', EURO.subarray(0, 2))
    assert.equal(out.finish().stdout, 'a€xyz\uFFFD')
  })

  it('decodes exactly like the live path, for random bytes in random pieces on both streams', () => {
    const alphabet = [
      b('a'),
      b('Z '),
      b('\n'),
      EURO,
      b('ß'),
      b('😀'),
      Buffer.from([0xff]),
      Buffer.from([0xc3]),
    ]
    for (let round = 0; round < 200; round++) {
      const { pushes, cap } = randomPushes(prng(round + 1), alphabet)
      const live = new OutputBuffer(cap, () => {})
      const batch = batched(cap)
      for (const [stream, data] of pushes) assert.equal(batch.push(stream, data), live.push(stream, data))
      assert.deepEqual(batch.finish(), live.finish(), `round ${round}`)
      assert.equal(batch.bytes, live.bytes)
    }
  })

  it('text crossing every batch size (16 KiB growing to 4 MiB, then reused) decodes whole', () => {
    const bytes = b(`${'a€ß😀'.repeat(100_000)}${'plain ascii '.repeat(500_000)}${'ß'.repeat(200_000)}`)
    const rand = prng(7)
    for (const streams of [['stdout'], ['stdout', 'stdout', 'stdout', 'stderr']] as const) {
      const out = batched(bytes.length)
      const sent = { stdout: [] as Buffer[], stderr: [] as Buffer[] }
      for (let at = 0, i = 0; at < bytes.length; i++) {
        const piece = bytes.subarray(at, at + 1 + Math.floor(rand() * 70_000))
        const stream = streams[i % streams.length]!
        sent[stream].push(piece)
        assert.equal(out.push(stream, piece), true)
        at += piece.length
      }
      const text = out.finish()
      assert.equal(text.stdout, Buffer.concat(sent.stdout).toString(), `${streams.length} streams: stdout`)
      assert.equal(text.stderr, Buffer.concat(sent.stderr).toString(), `${streams.length} streams: stderr`)
      assert.equal(text.output.length, text.stdout.length + text.stderr.length)
    }
  })

  it('valid UTF-8 comes out as Buffer#toString would decode it whole', () => {
    const text = `ascii ${'€ß😀'.repeat(50)} tail`
    const bytes = b(text)
    const out = batched(1 << 20)
    for (let at = 0; at < bytes.length; at += 7) out.push('stdout', bytes.subarray(at, at + 7))
    assert.equal(out.finish().stdout, text)
  })
})

describe('OutputBuffer live chunks and kept text agree', () => {
  it('for random bytes with secrets in random pieces: the chunks of a stream join to its text', () => {
    const alphabet = [b('a'), b('secret'), b('sec'), b('ret'), EURO, b('😀'), Buffer.from([0xe2]), b('\n')]
    for (let round = 0; round < 200; round++) {
      const { pushes, cap } = randomPushes(prng(1000 + round), alphabet)
      const chunks: OutputChunk[] = []
      const out = new OutputBuffer(cap, (c) => chunks.push(c), ['secret'])
      for (const [stream, data] of pushes) out.push(stream, data)
      const text = out.finish()
      for (const stream of ['stdout', 'stderr'] as const) {
        const mine = chunks.filter((c) => c.stream === stream)
        assert.equal(mine.map((c) => c.data).join(''), text[stream], `round ${round} ${stream}`)
        assert.ok(!text[stream].includes('secret'), `round ${round}: secret kept`)
      }
      assert.equal(
        chunks.reduce((n, c) => n + c.bytes, 0),
        out.bytes,
        `round ${round}: chunk byte counts add up to the bytes kept`,
      )
    }
  })
})

/** Every view a consumer can make: kept stdout/stderr/output, live chunks per stream and interleaved. */
function views(out: OutputBuffer, chunks: readonly OutputChunk[]): Record<string, string> {
  const text = out.finish()
  const join = (cs: readonly OutputChunk[]) => cs.map((c) => c.data).join('')
  return {
    stdout: text.stdout,
    stderr: text.stderr,
    output: text.output,
    'live stdout': join(chunks.filter((c) => c.stream === 'stdout')),
    'live stderr': join(chunks.filter((c) => c.stream === 'stderr')),
    'live 2>&1': join(chunks),
  }
}

describe('OutputBuffer: a secret split across stdout and stderr', () => {
  const SECRET = 'SECRET-42'

  it('half on each stream is hidden in every view, kept and live', () => {
    for (const [first, second] of [
      ['stdout', 'stderr'],
      ['stderr', 'stdout'],
    ] as const) {
      const chunks: OutputChunk[] = []
      const out = new OutputBuffer(1000, (c) => chunks.push(c), [SECRET])
      // Each half followed by exactly what a per-stream redactor holds back (8 for a 9-character secret).
      out.push(first, b(`a SECR${'x'.repeat(8)}`))
      out.push(second, b(`ET-42 b${'y'.repeat(8)}`))
      out.push(first, b('\n'))
      for (const [name, text] of Object.entries(views(out, chunks))) {
        assert.ok(!text.includes(SECRET), `${first}→${second}: ${name} shows it: ${JSON.stringify(text)}`)
      }
    }
  })

  it('a secret each stream shows part of, around masked text of the other, is hidden too', () => {
    // stdout's masked run (TOKEN) around stderr's "SEC": stdout's marker must not be the only one, or the
    // interleaved text would read SEC + RET with nothing between.
    const chunks: OutputChunk[] = []
    const out = new OutputBuffer(1000, (c) => chunks.push(c), ['SECRET', 'TOKEN'])
    out.push('stdout', b('TO'))
    out.push('stderr', b('SEC'))
    out.push('stdout', b('KEN'))
    out.push('stderr', b('RET'))
    for (const [name, text] of Object.entries(views(out, chunks))) {
      assert.ok(!text.includes('SECRET'), `${name} shows SECRET: ${JSON.stringify(text)}`)
      assert.ok(!text.includes('TOKEN'), `${name} shows TOKEN: ${JSON.stringify(text)}`)
    }
  })

  it('random interleavings of secret pieces on both streams: no view shows a secret whole', () => {
    const secrets = ['abcab', 'bca', 'xay']
    const alphabet = [b('a'), b('b'), b('c'), b('x'), b('y'), b('€'), b('abc'), b('ab')]
    for (let round = 0; round < 300; round++) {
      const { pushes } = randomPushes(prng(5000 + round), alphabet)
      const chunks: OutputChunk[] = []
      const out = new OutputBuffer(1 << 20, (c) => chunks.push(c), secrets)
      for (const [stream, data] of pushes) out.push(stream, data)
      const seen = views(out, chunks)
      for (const [name, text] of Object.entries(seen)) {
        for (const s of secrets)
          assert.ok(!text.includes(s), `round ${round}: ${name} shows ${s}: ${JSON.stringify(text)}`)
      }
      assert.equal(seen.output, seen['live 2>&1'], `round ${round}: output is the live chunks in order`)
      assert.equal(seen.stdout, seen['live stdout'])
      assert.equal(seen.stderr, seen['live stderr'])
      assert.equal(
        chunks.reduce((n, c) => n + c.bytes, 0),
        out.bytes,
        `round ${round}: chunk byte counts add up to the bytes kept`,
      )
    }
  })

  it('without a live consumer the kept views hide it the same way', () => {
    const out = new OutputBuffer(1000, () => {}, [SECRET], { live: false })
    out.push('stdout', b(`a SECR${'x'.repeat(8)}`))
    out.push('stderr', b(`ET-42 b${'y'.repeat(8)}`))
    const text = out.finish()
    for (const [name, view] of Object.entries(text)) assert.ok(!view.includes(SECRET), `${name}: ${view}`)
  })
})

describe("OutputBuffer with encoding 'buffer'", () => {
  function bytesBuffer(cap: number, redact: string[] = [], live = true) {
    const chunks: OutputChunk<Buffer>[] = []
    const out = new OutputBuffer<Buffer>(cap, (chunk) => chunks.push(chunk), redact, {
      live,
      encoding: 'buffer',
    })
    return { out, chunks }
  }
  const random = (n: number, seed: number) => {
    const rand = prng(seed)
    return Buffer.from(Array.from({ length: n }, () => Math.floor(rand() * 256)))
  }

  it('keeps bytes that are not UTF-8 exactly, per stream and interleaved, kept and live', () => {
    const { out, chunks } = bytesBuffer(1 << 20)
    const a = random(4096, 1)
    const e = random(1000, 2)
    out.push('stdout', a.subarray(0, 3))
    out.push('stderr', e)
    out.push('stdout', a.subarray(3))
    const kept = out.finish()
    assert.ok(Buffer.isBuffer(kept.stdout) && Buffer.isBuffer(kept.stderr) && Buffer.isBuffer(kept.output))
    assert.deepEqual(kept.stdout, a)
    assert.deepEqual(kept.stderr, e)
    assert.deepEqual(kept.output, Buffer.concat([a.subarray(0, 3), e, a.subarray(3)]))
    assert.ok(chunks.every((c) => Buffer.isBuffer(c.data)))
    assert.deepEqual(Buffer.concat(chunks.filter((c) => c.stream === 'stdout').map((c) => c.data)), a)
    assert.equal(
      chunks.reduce((n, c) => n + c.bytes, 0),
      out.bytes,
    )
  })

  it('cuts at the exact byte of the cap, even inside a UTF-8 character, and says so', () => {
    const { out } = bytesBuffer(4)
    assert.equal(out.push('stdout', b('ab')), true)
    assert.equal(out.push('stderr', EURO), false)
    assert.equal(out.truncated, true)
    assert.equal(out.bytes, 4)
    const kept = out.finish()
    assert.deepEqual(kept.stdout, b('ab'))
    assert.deepEqual(kept.stderr, EURO.subarray(0, 2))
    assert.deepEqual(kept.output, Buffer.concat([b('ab'), EURO.subarray(0, 2)]))
  })

  it('a cap of zero keeps an empty Buffer', () => {
    const { out, chunks } = bytesBuffer(0)
    assert.equal(out.push('stdout', b('x')), false)
    assert.deepEqual(out.finish(), {
      stdout: Buffer.alloc(0),
      stderr: Buffer.alloc(0),
      output: Buffer.alloc(0),
    })
    assert.equal(chunks.length, 0)
  })

  it('hides a secret as its UTF-8 bytes, among bytes that are not UTF-8', () => {
    const secret = 'pässwörd€'
    const { out, chunks } = bytesBuffer(1 << 20, [secret])
    const noise = Buffer.from([0xff, 0xfe, 0x00, 0xc3])
    out.push('stdout', Buffer.concat([noise, Buffer.from(secret), noise]))
    const kept = out.finish()
    assert.deepEqual(kept.stdout, Buffer.concat([noise, b('[REDACTED]'), noise]))
    assert.deepEqual(Buffer.concat(chunks.map((c) => c.data)), kept.stdout)
    assert.equal(
      chunks.reduce((n, c) => n + c.bytes, 0),
      out.bytes,
    )
  })

  it('hides a secret split across pushes, even inside one of its characters, in every view', () => {
    const secret = 'tök€n-42'
    const bytes = Buffer.concat([Buffer.from([0x80, 0xff]), Buffer.from(secret), Buffer.from([0xfe])])
    for (let cut = 1; cut < bytes.length; cut++) {
      const { out, chunks } = bytesBuffer(1 << 20, [secret])
      out.push('stdout', bytes.subarray(0, cut))
      out.push('stderr', b('x'))
      out.push('stdout', bytes.subarray(cut))
      const kept = out.finish()
      const live = {
        stdout: Buffer.concat(chunks.filter((c) => c.stream === 'stdout').map((c) => c.data)),
        output: Buffer.concat(chunks.map((c) => c.data)),
      }
      // The other stream's byte may come out inside the masked run, which then gets a marker on each side.
      assert.match(kept.stdout.toString('latin1'), /^\x80\xff(\[REDACTED\])+\xfe$/, `cut at ${cut}`)
      assert.deepEqual(live.stdout, kept.stdout, `cut at ${cut}: live`)
      assert.deepEqual(live.output, kept.output, `cut at ${cut}: live`)
      for (const view of [kept.stdout, kept.output, live.output]) {
        assert.ok(!view.includes(Buffer.from(secret)), `cut at ${cut}: ${view.toString('latin1')}`)
        for (let i = 1; i < secret.length; i++) {
          // No piece of it either: what shows beside a marker is only the noise around the secret.
          assert.ok(!view.toString('latin1').includes(Buffer.from(secret.slice(0, i + 1)).toString('latin1')))
        }
      }
    }
  })

  it('without a live consumer keeps the same bytes', () => {
    const { out, chunks } = bytesBuffer(10, [], false)
    out.push('stdout', random(6, 3))
    out.push('stderr', random(6, 4))
    const kept = out.finish()
    assert.equal(kept.output.length, 10)
    assert.deepEqual(kept.stdout, random(6, 3))
    assert.deepEqual(kept.stderr, random(6, 4).subarray(0, 4))
    assert.equal(chunks.length, 0)
  })

  it('grows past its first allocation without losing a byte', () => {
    const { out } = bytesBuffer(1 << 22, [], false)
    const all = random(3_000_000, 5)
    for (let at = 0; at < all.length; at += 65_536)
      out.push(at % 3 ? 'stdout' : 'stderr', all.subarray(at, at + 65_536))
    assert.ok(out.finish().output.equals(all))
  })
})

describe('OutputBuffer: the budget left when the cap is hit is shared fairly', () => {
  const o = (n: number) => b('o'.repeat(n))
  const e = (n: number) => b('e'.repeat(n))

  it('what both streams write from the crossing to the end shares what was left, half each', () => {
    const { out, chunks } = buffer(100)
    assert.equal(out.push('stdout', o(20)), true)
    assert.equal(out.push('stdout', o(200)), false, 'the crossing stops the sandbox at once')
    assert.equal(out.bytes, 100)
    assert.equal(out.truncated, true)
    assert.equal(out.push('stderr', e(30)), false)
    assert.equal(out.push('stderr', e(300)), false)
    assert.equal(out.push('stdout', o(5)), false)
    const seen = chunks.length
    const kept = out.finish()
    assert.ok(chunks.length > seen, 'the shared part comes out live at the end')
    assert.deepEqual(kept, {
      stdout: 'o'.repeat(60),
      stderr: 'e'.repeat(40),
      output: `${'o'.repeat(60)}${'e'.repeat(40)}`,
    })
    assert.equal(out.bytes, 100)
    assert.equal(
      chunks.reduce((n, c) => n + c.bytes, 0),
      100,
    )
  })

  it('a stream that wrote less than its half leaves the rest to the other', () => {
    const { out } = buffer(100)
    out.push('stdout', o(500))
    out.push('stderr', e(10))
    assert.deepEqual(out.finish(), {
      stdout: 'o'.repeat(90),
      stderr: 'e'.repeat(10),
      output: `${'o'.repeat(90)}${'e'.repeat(10)}`,
    })
  })

  it('in arrival order, each stream keeping the first of what it wrote', () => {
    const { out } = buffer(10)
    out.push('stderr', b('abcdefghijkl'))
    out.push('stdout', b('12'))
    out.push('stderr', b('mn'))
    out.push('stdout', b('3456789'))
    assert.deepEqual(out.finish(), { stdout: '12345', stderr: 'abcde', output: 'abcde12345' })
  })

  it('one stream alone still fills the cap exactly', () => {
    const { out } = buffer(10)
    out.push('stdout', b('0123456'))
    out.push('stdout', b('789abc'))
    assert.deepEqual(out.finish(), { stdout: '0123456789', stderr: '', output: '0123456789' })
  })

  it('the same with redaction and with Buffers', () => {
    const chunks: OutputChunk<Buffer>[] = []
    const out = new OutputBuffer<Buffer>(20, (c) => chunks.push(c), ['TOKEN'], { encoding: 'buffer' })
    out.push('stdout', b(`xxTOKEN${'x'.repeat(17)}`))
    out.push('stderr', b('y'.repeat(20)))
    const kept = out.finish()
    // stderr's text comes out while stdout's secret is held back: a marker on each side of it.
    assert.match(kept.stdout.toString(), /^xx(\[REDACTED\])+xxx$/)
    assert.deepEqual(kept.stderr, b('y'.repeat(10)))
    assert.deepEqual(Buffer.concat(chunks.map((c) => c.data)), kept.output)
  })
})

// The cap cuts what a stream wrote wherever it falls: inside a secret, the part before the cut matched no
// literal and came out as it was ("12345678tok-5ecret" of "12345678tok-5ecret-value").
describe('OutputBuffer: a secret cut by the cap', () => {
  const secret = 'tok-5ecret-value'
  const text = (d: string | Buffer) => (typeof d === 'string' ? d : d.toString('latin1'))
  for (const encoding of ['utf8', 'buffer'] as const) {
    it(`shows no part of it before the cut, kept or live (${encoding})`, () => {
      for (let cap = 9; cap < 8 + secret.length; cap++) {
        const chunks: OutputChunk<string | Buffer>[] = []
        const out = new OutputBuffer<string | Buffer>(cap, (c) => chunks.push(c), [secret], { encoding })
        out.push('stdout', b('12345678'))
        out.push('stdout', b(`${secret}\n`))
        const kept = out.finish()
        assert.equal(text(kept.stdout), '12345678[REDACTED]', `cap ${cap}`)
        assert.equal(text(kept.output), '12345678[REDACTED]', `cap ${cap}`)
        assert.equal(chunks.map((c) => text(c.data)).join(''), '12345678[REDACTED]', `cap ${cap}: live`)
      }
    })

    it(`shows no part of it when both streams share what was left (${encoding})`, () => {
      const chunks: OutputChunk<string | Buffer>[] = []
      const out = new OutputBuffer<string | Buffer>(20, (c) => chunks.push(c), [secret], { encoding })
      out.push('stdout', b('12345678'))
      out.push('stdout', b(secret))
      out.push('stderr', b(secret))
      const kept = out.finish()
      const views = [kept.stdout, kept.stderr, kept.output, ...chunks.map((c) => c.data)].map(text)
      for (const view of views) {
        for (let i = 2; i <= secret.length; i++) assert.ok(!view.includes(secret.slice(0, i)), view)
      }
      assert.equal(text(kept.stdout), '12345678[REDACTED]')
      assert.equal(text(kept.stderr), '[REDACTED]')
    })
  }
})

// A RegExp's match that the cap cuts short may no longer match at all (`ghp_` and 30 of its 36 characters),
// and which tail could begin one cannot be told: the last REGEX_WINDOW characters before a cut are hidden.
describe('OutputBuffer: a RegExp match cut by the cap', () => {
  const token = `ghp_${'A1b2C3d4'.repeat(4)}abcd`
  for (const encoding of ['utf8', 'buffer'] as const) {
    it(`shows no part of it before the cut, kept or live (${encoding})`, () => {
      for (const cap of [12, 20, 30, 40]) {
        const chunks: OutputChunk<string | Buffer>[] = []
        const out = new OutputBuffer<string | Buffer>(cap, (c) => chunks.push(c), [/ghp_[A-Za-z0-9]{36}/], {
          encoding,
        })
        out.push('stdout', b('12345678'))
        out.push('stdout', b(`${token}\n`))
        const kept = out.finish()
        const text = (d: string | Buffer) => (typeof d === 'string' ? d : d.toString('latin1'))
        for (const view of [kept.stdout, kept.output, ...chunks.map((c) => c.data)].map(text))
          assert.ok(!view.includes('ghp_A'), `cap ${cap}: ${view}`)
        assert.ok(text(kept.stdout).endsWith('[REDACTED]'), `cap ${cap}: ${text(kept.stdout)}`)
      }
    })
  }
})
