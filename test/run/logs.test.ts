// The log channel: JSON lines parsed into entries, raw text for everything else, within a byte budget.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { LogEntry } from '../../src/policy/schema.js'
import { LogCollector, parseLogLine } from '../../src/run/logs.js'
import { REDACTED } from '../../src/run/redact.js'

const MAX_LINE = 64 * 1024
const b = (s: string) => Buffer.from(s, 'utf8')

/** A collector with a large budget that records every onLog call. */
function collector(redact: readonly (string | RegExp)[] = [], budget = 1 << 20) {
  const seen: LogEntry[] = []
  const c = new LogCollector(budget, redact, (e) => seen.push(e))
  return { c, seen }
}

describe('parseLogLine', () => {
  for (const level of ['trace', 'debug', 'info', 'warn', 'error'] as const) {
    it(`level ${level} is kept`, () => {
      assert.deepEqual(parseLogLine(JSON.stringify({ level, msg: `a ${level} line` })), {
        level,
        msg: `a ${level} line`,
      })
    })
  }

  it('extra fields are kept as they are', () => {
    const entry = { level: 'debug', msg: 'step', step: 1, ok: true, tags: ['a'], ctx: { n: null } }
    assert.deepEqual(parseLogLine(JSON.stringify(entry)), entry)
  })

  it('a field order with level and msg last parses the same', () => {
    assert.deepEqual(parseLogLine('{"x":1,"msg":"m","level":"warn"}'), { x: 1, level: 'warn', msg: 'm' })
  })

  it('a non-string msg is stringified as JSON', () => {
    assert.deepEqual(parseLogLine('{"level":"info","msg":42}'), { level: 'info', msg: '42' })
    assert.deepEqual(parseLogLine('{"level":"info","msg":true}'), { level: 'info', msg: 'true' })
    assert.deepEqual(parseLogLine('{"level":"info","msg":{"a":[1,2]}}'), {
      level: 'info',
      msg: '{"a":[1,2]}',
    })
    assert.deepEqual(parseLogLine('{"level":"info","msg":[1,"x"]}'), { level: 'info', msg: '[1,"x"]' })
  })

  it('msg is always a string', () => {
    for (const msg of ['"s"', '1', 'null', 'false', '{}', '[]']) {
      const entry = parseLogLine(`{"level":"warn","msg":${msg}}`)
      assert.equal(typeof entry.msg, 'string', `msg ${msg}`)
      assert.equal(entry.level, 'warn')
    }
    assert.equal(typeof parseLogLine('{"level":"warn"}').msg, 'string', 'a missing msg')
  })

  it('a missing msg becomes the empty string', () => {
    assert.deepEqual(parseLogLine('{"level":"warn","code":7}'), { level: 'warn', msg: '', code: 7 })
  })

  /** Each line arrives as it was written, as text at info. */
  const rawAtInfo = (lines: readonly string[]) => {
    for (const line of lines) assert.deepEqual(parseLogLine(line), { level: 'info', msg: line }, line)
  }

  it('unknown levels arrive as raw text at info', () => {
    rawAtInfo([
      '{"level":"shout","msg":"odd"}',
      '{"level":"INFO","msg":"case matters"}',
      '{"level":"fatal","msg":"x"}',
      '{"level":3,"msg":"numeric level"}',
      '{"level":null,"msg":"x"}',
      '{"msg":"no level"}',
      '{}',
    ])
  })

  it('JSON that is not an object arrives as raw text at info', () => {
    rawAtInfo(['[1,2]', '[{"level":"error","msg":"x"}]', '42', '"a string"', 'null', 'true'])
  })

  it('text that is not JSON arrives as raw text at info, exactly as written', () => {
    rawAtInfo([
      'not json',
      '{"level":"error","msg":',
      '  indented text  ',
      '{level: "error"}',
      '\u00e9t\u00e9 ✓',
    ])
  })

  it('surrounding whitespace (a CRLF line end) does not stop a JSON line from parsing', () => {
    assert.deepEqual(parseLogLine('  {"level":"error","msg":"x"}\r'), { level: 'error', msg: 'x' })
  })
})

describe('LogCollector: lines', () => {
  it('a line split across pushes becomes one entry', () => {
    const { c, seen } = collector()
    c.push(b('{"level":"warn","m'))
    assert.equal(seen.length, 0, 'nothing before the newline')
    c.push(b('sg":"split"'))
    assert.equal(seen.length, 0, 'still nothing before the newline')
    c.push(b('}\n'))
    assert.deepEqual(seen, [{ level: 'warn', msg: 'split' }])
    assert.deepEqual(c.finish(), [{ level: 'warn', msg: 'split' }])
  })

  it('several lines in one push become several entries, in order', () => {
    const { c, seen } = collector()
    c.push(b('{"level":"info","msg":"1"}\nplain two\n{"level":"error","msg":"3"}\n'))
    assert.deepEqual(seen, [
      { level: 'info', msg: '1' },
      { level: 'info', msg: 'plain two' },
      { level: 'error', msg: '3' },
    ])
  })

  it('a line ending in one push and another starting in it', () => {
    const { c } = collector()
    c.push(b('{"level":"info","msg":"a"}\n{"level":"debug",'))
    c.push(b('"msg":"b"}\n'))
    assert.deepEqual(c.finish(), [
      { level: 'info', msg: 'a' },
      { level: 'debug', msg: 'b' },
    ])
  })

  it('a trailing line without a newline is delivered by finish()', () => {
    const { c, seen } = collector()
    c.push(b('{"level":"info","msg":"first"}\n{"level":"warn","msg":"last"}'))
    assert.deepEqual(seen, [{ level: 'info', msg: 'first' }], 'the unterminated line waits')
    const entries = c.finish()
    assert.deepEqual(entries, [
      { level: 'info', msg: 'first' },
      { level: 'warn', msg: 'last' },
    ])
    assert.deepEqual(seen, entries, 'onLog saw the last line too')
  })

  it('blank and whitespace-only lines are skipped', () => {
    const { c, seen } = collector()
    c.push(b('\n\n   \n\t\n{"level":"info","msg":"x"}\n\r\n\n'))
    c.push(b('   '))
    assert.deepEqual(c.finish(), [{ level: 'info', msg: 'x' }])
    assert.equal(seen.length, 1)
  })

  it('CRLF line ends still parse as JSON', () => {
    const { c } = collector()
    c.push(b('{"level":"debug","msg":"crlf"}\r\n'))
    assert.deepEqual(c.finish(), [{ level: 'debug', msg: 'crlf' }])
  })

  it('no input gives no entries', () => {
    const { c, seen } = collector()
    assert.deepEqual(c.finish(), [])
    assert.equal(seen.length, 0)
    assert.equal(c.bytes, 0)
    assert.equal(c.truncated, false)
  })

  it('finish() returns the same array as entries', () => {
    const { c } = collector()
    c.push(b('x\n'))
    assert.equal(c.finish(), c.entries)
  })

  it('a multi-byte character split across pushes decodes whole', () => {
    const { c } = collector()
    const euro = b('{"level":"info","msg":"5 \u20ac"}\n')
    const at = euro.indexOf(0xe2) + 1
    c.push(euro.subarray(0, at))
    c.push(euro.subarray(at))
    assert.deepEqual(c.finish(), [{ level: 'info', msg: '5 \u20ac' }])
  })

  it('a 4-byte character pushed one byte at a time decodes whole', () => {
    const { c } = collector()
    const data = b('smile \u{1F600} ok\n')
    for (let i = 0; i < data.length; i++) c.push(data.subarray(i, i + 1))
    assert.deepEqual(c.finish(), [{ level: 'info', msg: 'smile \u{1F600} ok' }])
  })

  it('onLog is called once per entry, in order, with the entries kept', () => {
    const { c, seen } = collector()
    const lines = Array.from({ length: 20 }, (_, i) => JSON.stringify({ level: 'info', msg: `m${i}`, i }))
    // Odd chunk sizes so lines straddle pushes.
    const data = b(`${lines.join('\n')}\n`)
    for (let at = 0; at < data.length; at += 7) c.push(data.subarray(at, at + 7))
    const entries = c.finish()
    assert.equal(seen.length, 20)
    assert.deepEqual(
      seen.map((e) => e.msg),
      lines.map((_, i) => `m${i}`),
    )
    seen.forEach((e, i) => {
      assert.equal(e, entries[i], `onLog got the kept entry object ${i}`)
    })
  })

  it('works without onLog', () => {
    const c = new LogCollector(1000, [])
    c.push(b('{"level":"error","msg":"x"}\n'))
    assert.deepEqual(c.finish(), [{ level: 'error', msg: 'x' }])
  })
})

describe('LogCollector: byte budget', () => {
  it('counts bytes, not characters', () => {
    const { c } = collector()
    c.push(b('\u20ac\u20ac\n'))
    assert.equal(c.bytes, 7)
    assert.equal(c.truncated, false)
  })

  it('keeps exactly the budget, sets truncated, and keeps nothing past it', () => {
    const { c, seen } = collector([], 60)
    const first = '{"level":"info","msg":"a"}\n' // 27 bytes, and as many kept
    c.push(b(`${first}0123456789012345\n{"level":"error","msg":"never"}\n`))
    assert.equal(c.bytes, 60)
    assert.equal(c.truncated, true)
    c.push(b('{"level":"error","msg":"after"}\n'))
    assert.equal(c.bytes, 60, 'nothing more is counted')
    const entries = c.finish()
    // The raw line is 17 bytes read, and 34 kept as its entry: 27 + 34 > 60.
    assert.equal(c.keptBytes, -1, 'full')
    assert.deepEqual(entries, [{ level: 'info', msg: 'a' }])
    assert.deepEqual(seen, entries)
    for (const e of entries) {
      assert.ok(
        !JSON.stringify(e).includes('never') && !JSON.stringify(e).includes('after'),
        'nothing past budget',
      )
    }
  })

  it('filling the budget exactly is not truncation; one byte more is', () => {
    const { c } = collector([], 27)
    c.push(b('{"level":"info","msg":"a"}\n'))
    assert.equal(c.bytes, 27)
    assert.equal(c.keptBytes, 27)
    assert.equal(c.truncated, false)
    c.push(b('x'))
    assert.equal(c.bytes, 27)
    assert.equal(c.truncated, true)
    assert.deepEqual(c.finish(), [{ level: 'info', msg: 'a' }])
  })

  it('a zero budget keeps nothing', () => {
    const { c } = collector([], 0)
    c.push(b('{"level":"info","msg":"x"}\n'))
    assert.equal(c.bytes, 0)
    assert.equal(c.truncated, true)
    assert.deepEqual(c.finish(), [])
  })

  it('an empty push does not truncate', () => {
    const { c } = collector([], 0)
    c.push(Buffer.alloc(0))
    assert.equal(c.truncated, false)
  })

  it('bounds what it keeps as JSON too: short lines and control characters cost what their entries take', () => {
    // Counted as bytes read only, 16 MiB of "\x01\n" became 8M entries: 268 MB of result as JSON (16
    // times the budget), and 1.3 GB of the host's heap while the run went on.
    const budget = 64 * 1024
    for (const line of ['\x01', 'a', '\x01'.repeat(1000), '{"level":"info","msg":"\\u0001"}']) {
      const { c, seen } = collector([], budget)
      c.push(b(`${line}\n`.repeat(Math.ceil(budget / (line.length + 1)) + 1)))
      const kept = c.finish()
      const json = kept.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)) + 1, 0)
      assert.ok(json <= budget, `${json} bytes of entries kept for ${JSON.stringify(line.slice(0, 20))}`)
      assert.ok(json > budget / 2, `only ${json} bytes kept`)
      assert.equal(c.truncated, true)
      assert.deepEqual(seen, kept)
    }
  })

  it('a cut through a multi-byte character ends in U+FFFD, not a broken string', () => {
    // A JSON line spaced out is kept smaller than it was read: room for the cut line's entry.
    const spaced = '{ "level" :  "info" ,  "msg" :  "a"                        }\n' // 60 bytes, 27 kept
    const { c } = collector([], 64)
    c.push(b(`${spaced}ab\u20ac`)) // the cut leaves the first 2 of the euro sign's 3
    assert.equal(c.bytes, 64)
    assert.deepEqual(c.finish(), [
      { level: 'info', msg: 'a' },
      { level: 'info', msg: 'ab\ufffd' },
    ])
  })
})

describe('LogCollector: redaction', () => {
  it('a secret in a JSON line is redacted in msg and in other fields', () => {
    const { c, seen } = collector(['hunter22'])
    c.push(b('{"level":"warn","msg":"pw hunter22","detail":{"pw":"hunter22"}}\n'))
    assert.deepEqual(seen, [{ level: 'warn', msg: `pw ${REDACTED}`, detail: { pw: REDACTED } }])
  })

  it('a secret in a raw text line is redacted', () => {
    const { c } = collector(['hunter22'])
    c.push(b('login with hunter22 failed\n'))
    assert.deepEqual(c.finish(), [{ level: 'info', msg: `login with ${REDACTED} failed` }])
  })

  it('a secret split across pushes is redacted (lines are redacted whole)', () => {
    const { c, seen } = collector(['hunter22'])
    c.push(b('{"level":"info","msg":"pw hun'))
    c.push(b('ter'))
    c.push(b('22"}\nhun'))
    c.push(b('ter22'))
    const entries = c.finish()
    assert.deepEqual(entries, [
      { level: 'info', msg: `pw ${REDACTED}` },
      { level: 'info', msg: REDACTED },
    ])
    assert.deepEqual(seen, entries)
    for (const e of entries) assert.ok(!JSON.stringify(e).includes('hunter'), 'no part of the secret')
  })

  it('regex patterns apply too', () => {
    const { c } = collector([/ghp_[A-Za-z0-9]{8}/])
    c.push(b('{"level":"error","msg":"token ghp_AbCd1234 rejected"}\n'))
    assert.deepEqual(c.finish(), [{ level: 'error', msg: `token ${REDACTED} rejected` }])
  })

  it('a secret JSON escapes in the line (quote, backslash, \\u) is redacted in the parsed entry', () => {
    for (const secret of ['pa"ss\\word', 'caf\u00e9-s3cret']) {
      const { c } = collector([secret])
      // JSON.stringify escapes the quote and backslash; Python's json.dumps also escapes non-ASCII.
      const line = JSON.stringify({ level: 'warn', msg: `pw ${secret}` }).replace(
        /[\u0080-\uffff]/g,
        (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
      )
      c.push(b(`${line}\n`))
      const [entry] = c.finish()
      assert.ok(entry, 'one entry')
      assert.ok(!entry.msg.includes(secret), `the secret ${JSON.stringify(secret)} leaked: ${entry.msg}`)
    }
  })

  it('a secret that is a JSON value (a number) is redacted without losing the level', () => {
    const { c } = collector(['12345'])
    c.push(b('{"level":"error","msg":"failed","pin":12345}\n'))
    const [entry] = c.finish()
    assert.ok(entry, 'one entry')
    assert.equal(entry.level, 'error')
    assert.equal(entry.msg, 'failed')
  })
})

describe('LogCollector: over-long lines', () => {
  it('a line longer than 64 KiB without a newline is delivered as raw text, not held', () => {
    const { c, seen } = collector([], 1 << 20)
    const long = `{"level":"info","msg":"${'a'.repeat(MAX_LINE + 10)}`
    c.push(b(long))
    assert.equal(seen.length, 1, 'delivered before any newline or finish()')
    assert.deepEqual(seen[0], { level: 'info', msg: long })
    c.push(b('tail"}\n{"level":"warn","msg":"next"}\n'))
    assert.deepEqual(c.finish(), [
      { level: 'info', msg: long },
      { level: 'info', msg: 'tail"}' },
      { level: 'warn', msg: 'next' },
    ])
  })

  it('an over-long line arriving in many small pushes is delivered once it passes 64 KiB', () => {
    const { c, seen } = collector([], 1 << 20)
    const chunk = 'x'.repeat(4096)
    for (let i = 0; i < 16; i++) c.push(b(chunk))
    assert.equal(seen.length, 0, 'exactly 64 KiB is still held')
    c.push(b('y'))
    assert.equal(seen.length, 1)
    assert.equal(seen[0]?.msg, `${chunk.repeat(16)}y`)
    assert.equal(seen[0]?.level, 'info')
    assert.deepEqual(c.finish().length, 1, 'nothing left over')
  })

  it('a long JSON line under 64 KiB is still parsed', () => {
    const { c } = collector([], 1 << 20)
    const msg = 'z'.repeat(MAX_LINE - 100)
    c.push(b(JSON.stringify({ level: 'debug', msg }).slice(0, 1000)))
    c.push(b(`${JSON.stringify({ level: 'debug', msg }).slice(1000)}\n`))
    assert.deepEqual(c.finish(), [{ level: 'debug', msg }])
  })

  it('a secret straddling the 64 KiB cut of an over-long line is still redacted', () => {
    const { c } = collector(['SUPERSECRET'], 1 << 20)
    c.push(b(`${'x'.repeat(MAX_LINE + 4)}SUPER`))
    c.push(b('SECRET rest\n'))
    const entries = c.finish()
    const all = entries.map((e) => e.msg).join('')
    assert.ok(!all.includes('SUPERSECRET'), 'whole secret')
    assert.ok(
      !entries.some((e) => e.msg.endsWith('SUPER')),
      `the first half leaked: ${entries[0]?.msg.slice(-8)}`,
    )
    assert.ok(!entries.some((e) => e.msg.startsWith('SECRET')), 'the second half leaked')
  })
})

describe('LogCollector: redaction of keys', () => {
  it('a secret as a key, at any depth and in arrays, is redacted like a value', () => {
    const { c } = collector(['hunter22'])
    const line = {
      level: 'info',
      msg: 'm',
      hunter22: 1,
      n: { 'x-hunter22-y': { hunter22: 'hunter22' } },
      a: [{ hunter22: 2 }],
    }
    c.push(b(`${JSON.stringify(line)}\n`))
    const entries = c.finish()
    assert.equal(entries.length, 1)
    assert.ok(!JSON.stringify(entries).includes('hunter22'), JSON.stringify(entries))
    assert.equal(entries[0]?.level, 'info')
  })

  it('parseLogLine redacts keys too', () => {
    const entry = parseLogLine('{"level":"warn","msg":"m","k-hunter22":{"hunter22":1}}', (t) =>
      t.replaceAll('hunter22', REDACTED),
    )
    assert.ok(!JSON.stringify(entry).includes('hunter22'), JSON.stringify(entry))
  })
})

// The budget cuts a line wherever it falls: inside a secret, the part before the cut matched no literal and
// came out as it was (a line ending `xxSECRETVALU`). Every cut a secret can straddle is tried.
describe('LogCollector: a secret cut by the budget', () => {
  const secret = 'SECRETVALUE'
  const leaks = (entries: LogEntry[]) => {
    const text = JSON.stringify(entries)
    return Array.from({ length: secret.length - 1 }, (_, i) => secret.slice(0, i + 2)).filter((p) =>
      text.includes(p),
    )
  }

  it('a raw line: no prefix of the secret before the cut, at any cut', () => {
    for (let cut = 3; cut <= 2 + secret.length; cut++) {
      const { c, seen } = collector([secret], cut)
      c.push(b(`xx${secret} and more\n`))
      const entries = c.finish()
      assert.deepEqual(leaks(entries), [], `budget ${cut}: ${JSON.stringify(entries)}`)
      // Kept entries count as their JSON line against the same budget, so a cut line is dropped whole
      // here; where one is kept, its secret's start is hidden.
      assert.ok(entries.length === 0 || entries[0]?.msg === `xx${REDACTED}`, `budget ${cut}`)
      assert.ok(c.truncated)
      assert.deepEqual(seen, entries, 'what onLog saw')
    }
  })

  it('a JSON line cut inside a string value, in one push or many', () => {
    const line = `{"level":"info","msg":"token ${secret} ok"}\n`
    for (let cut = 30; cut < 30 + secret.length; cut++) {
      for (const pieces of [1, 3]) {
        const { c } = collector([secret], cut)
        const step = Math.ceil(line.length / pieces)
        for (let at = 0; at < line.length; at += step) c.push(b(line.slice(at, at + step)))
        const entries = c.finish()
        assert.deepEqual(leaks(entries), [], `budget ${cut}, ${pieces} pushes: ${JSON.stringify(entries)}`)
      }
    }
  })

  it('a RegExp match cut short is hidden too, though what is left no longer matches', () => {
    const token = `ghp_${'A1b2C3d4'.repeat(4)}abcd` // ghp_ and 36 characters
    const pattern = /ghp_[A-Za-z0-9]{36}/
    const { c } = collector([pattern], 40)
    c.push(b(`id ${token}\n`))
    const entries = c.finish()
    assert.ok(!JSON.stringify(entries).includes('ghp_A1b2'), JSON.stringify(entries))
    assert.ok(entries[0]?.msg.endsWith(REDACTED), JSON.stringify(entries))
  })

  it('an over-long line cut by the budget: no prefix at the cut either', () => {
    const { c } = collector([secret], MAX_LINE + 100 + 6)
    c.push(b(`${'x'.repeat(MAX_LINE + 100)}${secret} tail`))
    const entries = c.finish()
    assert.deepEqual(leaks(entries), [], JSON.stringify(entries.map((e) => e.msg.slice(-20))))
    assert.ok(c.truncated)
  })

  it('a cut that splits a character after a secret prefix still hides the prefix', () => {
    const { c } = collector(['SECRET€VALUE'], 2 + 6 + 1)
    c.push(b('xxSECRET€VALUE\n'))
    const entries = c.finish()
    assert.ok(!JSON.stringify(entries).includes('SECR'), JSON.stringify(entries))
  })

  it('a line cut right after its JSON object shows nothing of what followed it', () => {
    const line = '{"level":"warn","msg":"m"}'
    for (const budget of [line.length, line.length + 1, line.length + 2]) {
      const { c } = collector([secret], budget)
      c.push(b(`${line}${secret}\n`))
      const entries = c.finish()
      assert.deepEqual(leaks(entries), [], JSON.stringify(entries))
      // Kept whole, or (its JSON line past the budget) not at all.
      assert.ok(entries.length === 0 || (entries[0]?.level === 'warn' && entries[0]?.msg === 'm'))
    }
  })
})
