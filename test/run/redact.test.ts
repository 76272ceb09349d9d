// Streaming redaction: literal and regex secrets, split across pushes, never leaked in any emitted piece.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { baseEnv } from '../../src/policy/env.js'
import { parsePolicy } from '../../src/policy/schema.js'
import { MarkerRuns, REDACTED, Redaction, Redactor, SECRET_NAME, secretValues } from '../../src/run/redact.js'
import { prng } from '../helpers.js'

/** Push every chunk, then flush; returns every piece the redactor handed out (flush last). */
function stream(redactor: Redactor, chunks: readonly string[]): string[] {
  const pieces = chunks.map((c) => redactor.push(c))
  pieces.push(redactor.flush())
  return pieces
}

/** The input cut into single characters (UTF-16 code units). */
const chars = (s: string) => s.split('')

/** Every emitted piece must be free of the secret and of any 2+ character fragment of it that ends or starts a piece. */
function assertNoLeak(pieces: readonly string[], secret: string): void {
  pieces.forEach((piece, i) => {
    assert.ok(!piece.includes(secret), `piece ${i} ${JSON.stringify(piece)} contains the secret`)
    for (let n = 2; n < secret.length; n++) {
      const head = secret.slice(0, n)
      const tail = secret.slice(-n)
      assert.ok(
        !piece.endsWith(head),
        `piece ${i} ${JSON.stringify(piece)} ends with the secret's start ${head}`,
      )
      assert.ok(
        !piece.startsWith(tail),
        `piece ${i} ${JSON.stringify(piece)} starts with the secret's end ${tail}`,
      )
    }
  })
}

function randomString(rand: () => number, alphabet: string, length: number): string {
  let s = ''
  for (let i = 0; i < length; i++) s += alphabet[Math.floor(rand() * alphabet.length)]
  return s
}

/** Cut text into random chunks of 0..maxChunk characters (empty pushes included). */
function randomChunks(rand: () => number, text: string, maxChunk: number): string[] {
  const chunks: string[] = []
  for (let at = 0; at < text.length; ) {
    const n = Math.floor(rand() * (maxChunk + 1))
    chunks.push(text.slice(at, at + n))
    at += n
  }
  return chunks
}

describe('Redactor: literal secrets', () => {
  it('replaces a secret that arrives whole in one push', () => {
    const r = new Redactor(['hunter22'])
    const pieces = stream(r, ['my password is hunter22, ok'])
    assert.equal(pieces.join(''), `my password is ${REDACTED}, ok`)
    assertNoLeak(pieces, 'hunter22')
  })

  it('replaces every occurrence', () => {
    const r = new Redactor(['s3cr3t'])
    assert.equal(
      r.apply('s3cr3t and s3cr3t;s3cr3ts3cr3t'),
      `${REDACTED} and ${REDACTED};${REDACTED}`,
      'adjacent matches are one run of hidden characters, one marker',
    )
  })

  it('REDACTED is the literal marker [REDACTED]', () => {
    assert.equal(REDACTED, '[REDACTED]')
  })

  it('a secret split across two pushes is redacted, and neither half leaks in any piece', () => {
    for (let split = 1; split < 'hunter22'.length; split++) {
      const r = new Redactor(['hunter22'])
      const text = 'pw=hunter22;'
      const at = 3 + split
      const pieces = stream(r, [text.slice(0, at), text.slice(at)])
      assert.equal(pieces.join(''), `pw=${REDACTED};`, `split at ${split}`)
      assertNoLeak(pieces, 'hunter22')
    }
  })

  it('a secret split across three pushes is redacted', () => {
    const r = new Redactor(['correct-horse'])
    const pieces = stream(r, ['before corr', 'ect-ho', 'rse after'])
    assert.equal(pieces.join(''), `before ${REDACTED} after`)
    assertNoLeak(pieces, 'correct-horse')
  })

  it('a secret pushed one character at a time is redacted, with surrounding text', () => {
    const secret = 'ghp_ABCDEFGHIJ0123456789'
    const r = new Redactor([secret])
    const text = `token: ${secret}\nnext ${secret} end`
    const pieces = stream(r, chars(text))
    assert.equal(pieces.join(''), `token: ${REDACTED}\nnext ${REDACTED} end`)
    assertNoLeak(pieces, secret)
  })

  it('text that only looks like the start of a secret is released once it cannot become one', () => {
    const r = new Redactor(['abcdef'])
    assert.equal(
      r.push('xxxxxxxabc'),
      'xxxxx',
      'the last 5 characters, with the possible start "abc", are held',
    )
    assert.equal(r.push('xyz-and-more'), 'xxabcxyz-and', 'released once the secret cannot complete')
    assert.equal(r.flush(), '-more')
    assert.equal(r.flush(), '', 'a second flush has nothing left')
  })

  it('a complete secret at the very end of a push is held back whole, not cut', () => {
    const r = new Redactor(['abcd'])
    const first = r.push('xxabcd')
    assert.equal(first, 'xx')
    assert.equal(r.flush(), REDACTED)
  })

  it('holds back no more than the longest secret minus one character', () => {
    const r = new Redactor(['abcdefgh', 'xy'])
    assert.equal(r.push('0123456789'), '012', '7 characters held for an 8-character secret')
    assert.equal(r.flush(), '3456789')
  })

  it('longest first: a secret that contains another is replaced whole', () => {
    const r = new Redactor(['pass', 'password123', 'word'])
    assert.equal(r.apply('password123'), REDACTED)
    assert.equal(r.apply('pass word'), `${REDACTED} ${REDACTED}`)
    const pieces = stream(r, chars('x password123 y'))
    assert.equal(pieces.join(''), `x ${REDACTED} y`)
    assertNoLeak(pieces, 'password123')
  })

  it('longest first regardless of the order given', () => {
    const short = new Redactor(['abc', 'abcdef'])
    const long = new Redactor(['abcdef', 'abc'])
    assert.equal(short.apply('abcdefg'), `${REDACTED}g`)
    assert.equal(long.apply('abcdefg'), `${REDACTED}g`)
  })

  it('overlapping secrets leave nothing of either in the clear', () => {
    const r = new Redactor(['abcde', 'cdefg'])
    const whole = 'xabcdefgx'
    const pieces = stream(r, chars(whole))
    assert.equal(pieces.join(''), r.apply(whole))
    assertNoLeak(pieces, 'abcde')
  })

  it('regular-expression metacharacters in a literal secret are matched literally', () => {
    const secret = 'a.b*c+(d)[e]{2}|f^$\\g?'
    const r = new Redactor([secret])
    assert.equal(r.apply(`<${secret}>`), `<${REDACTED}>`)
    assert.equal(
      r.apply('aXb*c+(d)[e]{2}|f^$\\g?'),
      'aXb*c+(d)[e]{2}|f^$\\g?',
      '"." does not match any character',
    )
    const pieces = stream(r, chars(`<${secret}>`))
    assert.equal(pieces.join(''), `<${REDACTED}>`)
    assertNoLeak(pieces, secret)
  })

  it('duplicate and empty literals are harmless', () => {
    const r = new Redactor(['tok1', 'tok1', ''])
    assert.ok(r.active, 'a non-empty literal makes it active')
    assert.equal(r.apply('a tok1 b'), `a ${REDACTED} b`)
  })
})

describe('Redactor: regular expressions', () => {
  it('a regex without the g flag still replaces every match', () => {
    const r = new Redactor([/sk-[a-z0-9]{8}/])
    assert.equal(r.apply('sk-abcd1234 and sk-zzzz9999'), `${REDACTED} and ${REDACTED}`)
  })

  it('a regex with the g flag replaces every match', () => {
    const r = new Redactor([/sk-[a-z0-9]{8}/g])
    assert.equal(r.apply('sk-abcd1234 and sk-zzzz9999'), `${REDACTED} and ${REDACTED}`)
  })

  it('the i flag is kept', () => {
    const r = new Redactor([/bearer [a-z]+/i])
    assert.equal(r.apply('Authorization: BEARER AbCdEf'), `Authorization: ${REDACTED}`)
  })

  it("the caller's regex is not mutated (lastIndex stays 0, flags unchanged)", () => {
    const re = /x\d+/g
    const r = new Redactor([re])
    r.apply('x1 x2 x3')
    r.push('x12 ')
    r.flush()
    assert.equal(re.lastIndex, 0)
    assert.equal(re.flags, 'g')
  })

  it('a regex match split across single-character pushes is redacted, nothing of it leaks', () => {
    const r = new Redactor([/AKIA[0-9A-Z]{16}/])
    const key = 'AKIAIOSFODNN7EXAMPLE'
    const pieces = stream(r, chars(`key=${key} done`))
    assert.equal(pieces.join(''), `key=${REDACTED} done`)
    assertNoLeak(pieces, key)
  })

  it('regex and literal secrets together', () => {
    const r = new Redactor(['hunter22', /tok_[0-9a-f]{6}/])
    const text = 'a hunter22 b tok_00ff99 c'
    const pieces = stream(r, chars(text))
    assert.equal(pieces.join(''), `a ${REDACTED} b ${REDACTED} c`)
    assertNoLeak(pieces, 'hunter22')
    assertNoLeak(pieces, 'tok_00ff99')
  })

  it('a regex keeps back less than two windows (512 characters); longer text is released in order', () => {
    const r = new Redactor([/zzz/])
    assert.equal(r.push('a'.repeat(511)), '', 'deciding waits for two windows')
    assert.equal(r.push('b'), 'a'.repeat(256), 'then the first window is decided')
    assert.equal(r.push('b'.repeat(10)), '', 'and the next waits for two windows again')
    assert.equal(r.flush(), 'a'.repeat(255) + 'b'.repeat(11))
  })

  it('a match straddling the hold-back cut is not split: the cut moves back to its start', () => {
    const r = new Redactor([/tok-1+/])
    // 574 characters: the first window ends at 318, inside the match at 300..324.
    const text = `${'x'.repeat(300)}tok-${'1'.repeat(20)}${'y'.repeat(250)}`
    const first = r.push(text)
    assert.equal(first, 'x'.repeat(300), 'released exactly up to the start of the match')
    const rest = r.flush()
    assert.equal(rest, REDACTED + 'y'.repeat(250))
    assertNoLeak([first, rest], `tok-${'1'.repeat(20)}`)
  })

  it('a literal secret straddling the cut is not split either', () => {
    const r = new Redactor(['abcdefgh', /never-matches-\d{100}/])
    // The RegExp decides up to 560 - 256 = 304, inside abcdefgh (300..308).
    const text = `${'x'.repeat(300)}abcdefgh${'y'.repeat(252)}`
    const first = r.push(text)
    assert.equal(first, 'x'.repeat(300))
    assert.equal(r.flush(), REDACTED + 'y'.repeat(252))
  })

  it("moving the cut into another pattern's match moves it again, to that match's start", () => {
    const r = new Redactor([/abc/, /cdef/])
    // 560 characters: the cut 304 is inside cdef (302..306); moved to 302 it is inside abc (300..303).
    const text = `${'x'.repeat(300)}abcdef${'y'.repeat(254)}`
    const first = r.push(text)
    assert.equal(first, 'x'.repeat(300), 'nothing of abc is released')
    const rest = r.flush()
    assert.equal(first + rest, r.apply(text))
    assertNoLeak([first, rest], 'abc')
  })

  it('consecutive adjacent matches at the cut are one run, one marker', () => {
    const r = new Redactor(['abcd'])
    const pieces = stream(r, ['abcdabcdab', 'cdabcd'])
    assert.equal(pieces.join(''), REDACTED)
    assertNoLeak(pieces, 'abcd')
  })
})

describe('Redactor: streaming equals whole-text redaction (seeded property test)', () => {
  it('literal secrets over an alphabet made of their characters', () => {
    const secrets = ['abcab', 'bca', 'cc', 'aaaa']
    for (let seed = 1; seed <= 400; seed++) {
      const rand = prng(seed)
      const whole = randomString(rand, 'abcx', Math.floor(rand() * 60))
      const chunks = randomChunks(rand, whole, 1 + Math.floor(rand() * 8))
      const r = new Redactor(secrets)
      const pieces = stream(r, chunks)
      const expected = r.apply(whole)
      assert.equal(pieces.join(''), expected, `seed ${seed}: ${JSON.stringify(chunks)}`)
      for (const [i, piece] of pieces.entries()) {
        for (const s of secrets) {
          assert.ok(!piece.includes(s), `seed ${seed}: piece ${i} ${JSON.stringify(piece)} contains ${s}`)
        }
      }
    }
  })

  it('literal and regex secrets on inputs long enough to move the 256-character cut', () => {
    const secrets: (string | RegExp)[] = ['abca', /12+1/, /X[12]{2}Y/i]
    for (let seed = 1; seed <= 60; seed++) {
      const rand = prng(seed * 7919)
      const whole = randomString(rand, 'abcx12yY', 200 + Math.floor(rand() * 800))
      const chunks = randomChunks(rand, whole, 1 + Math.floor(rand() * 40))
      const r = new Redactor(secrets)
      const pieces = stream(r, chunks)
      assert.equal(pieces.join(''), r.apply(whole), `seed ${seed}`)
    }
  })

  it('single-character pushes give the same text as one apply', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const rand = prng(seed + 1000)
      const whole = randomString(rand, 'ab1x', 300 + Math.floor(rand() * 300))
      const r = new Redactor(['abab', 'ba1', /1{3,}/])
      assert.equal(stream(r, chars(whole)).join(''), r.apply(whole), `seed ${seed}`)
    }
  })
})

describe('Redactor: inactive', () => {
  it('an empty list passes text through untouched and immediately', () => {
    const r = new Redactor([])
    assert.equal(r.active, false)
    assert.equal(r.push('hello wor'), 'hello wor', 'nothing held back')
    assert.equal(r.push('ld [REDACTED]'), 'ld [REDACTED]')
    assert.equal(r.flush(), '')
    assert.equal(r.apply('anything'), 'anything')
  })

  it('a list of only empty strings is inactive', () => {
    const r = new Redactor(['', ''])
    assert.equal(r.active, false)
    assert.equal(r.push('abc'), 'abc')
  })

  it('a regex makes it active', () => {
    assert.equal(new Redactor([/x/]).active, true)
  })
})

describe('Redactor: surrogate pairs, look-arounds, overlapping patterns', () => {
  it('no emitted piece splits a surrogate pair (each piece is written out on its own)', () => {
    const r = new Redactor(['abcd'])
    const pieces = stream(r, ['x\u{1F600}yz'])
    assert.equal(pieces.join(''), 'x\u{1F600}yz')
    for (const [i, piece] of pieces.entries()) {
      assert.ok(
        !/[\uD800-\uDBFF]$/.test(piece),
        `piece ${i} ${JSON.stringify(piece)} ends in a lone high surrogate`,
      )
      assert.ok(
        !/^[\uDC00-\uDFFF]/.test(piece),
        `piece ${i} ${JSON.stringify(piece)} starts with a lone low surrogate`,
      )
    }
  })

  it('a pattern no linear-time engine can run is refused, naming redact.N and why', () => {
    for (const [re, why] of [
      [/(?<=key=)\w+/, /look-behind/],
      [/(?<!x)y/, /look-behind/],
      [/\w+(?=!)/, /look-ahead/],
      [/a(?!b)/, /look-ahead/],
      [/(a)\1/, /backreference/],
      [/(?<n>a)\k<n>/, /backreference/],
    ] as const) {
      assert.throws(
        () => new Redactor(['literal', re]),
        (e: unknown) => e instanceof PolicyError && e.field === 'redact.1' && why.test(e.message),
        String(re),
      )
      assert.throws(
        () => parsePolicy({ redact: [re] }),
        (e: unknown) => e instanceof PolicyError && e.field === 'redact.0' && /linear time/.test(e.message),
        `the schema refuses ${re}`,
      )
    }
    // Inside a character class they are plain characters.
    assert.equal(new Redactor([/[(?=]x/]).apply('(x =x'), `${REDACTED} ${REDACTED}`)
  })

  it('the i, m, s and u flags keep their meaning; g and y change nothing', () => {
    assert.equal(new Redactor([/^tok$/m]).apply('a\ntok\nb'), `a\n${REDACTED}\nb`)
    assert.equal(new Redactor([/^tok$/]).apply('a\ntok\nb'), 'a\ntok\nb', 'without m, ^ is the start')
    assert.equal(new Redactor([/a.b/s]).apply('a\nb'), REDACTED)
    assert.equal(new Redactor([/a.b/]).apply('a\nb'), 'a\nb')
    assert.equal(new Redactor([/TOK/i]).apply('tok'), REDACTED)
    assert.equal(new Redactor([/\u{1F600}+/u]).apply('x😀😀x'), `x${REDACTED}x`)
    assert.equal(new Redactor([/tok/gy]).apply('a tok b'), `a ${REDACTED} b`)
  })

  it('^ and \\b see the text before a streamed piece, not a new start', () => {
    const r = new Redactor([/^start/, /\bword\b/])
    const whole = `start ${'x'.repeat(600)}start sword word`
    const out = stream(r, chars(whole)).join('')
    assert.equal(out, `${REDACTED} ${'x'.repeat(600)}start sword ${REDACTED}`)
  })

  it('matches are found on the raw text, every pattern independently, the same streamed or whole', () => {
    // 'aab' and /b1+b/ overlap at the first b: both are hidden as one run; the regex resumes after its
    // own match (…11b at 6), as String.replace would, so "11b" after it is plain text, streamed or not.
    const r = new Redactor(['aab', /b1+b/])
    const whole = `${'x'.repeat(300)}aab11b11b${'y'.repeat(300)}`
    const out = stream(r, chars(whole)).join('')
    assert.equal(out, r.apply(whole))
    assert.ok(out.includes(`x${REDACTED}11by`), `got ${out.slice(295, 320)}`)
  })
})

describe('secretValues', () => {
  it('picks values of variables whose names look secret', () => {
    const env = {
      API_TOKEN: 'tok-api',
      GITHUB_TOKEN: 'ghp_abcdef',
      DB_PASSWORD: 'pa55word',
      AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI',
      PRIVATE_KEY: '-----BEGIN',
      MY_KEY: 'mykeyvalue',
      API_KEY: 'apikeyvalue',
      APIKEY: 'apikey2value',
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
      KEY_ID: 'key-id-value',
      SSH_PASSPHRASE: 'phrase',
      FTP_PASSWD: 'passwd',
      GOOGLE_APPLICATION_CREDENTIALS: '/creds.json',
      NPM_AUTH: 'npm-auth',
      lower_token: 'lowertok',
      // Secrets by other names: short password names, URLs and DSNs that carry credentials, cookies.
      MYSQL_PWD: 'mysqlpw',
      DB_PASS: 'dbpass1',
      SMTP_PASS: 'smtppass',
      DATABASE_URL: 'postgres://app:pw@db/app',
      REDIS_URL_WITH_AUTH: 'redis://:pw@cache',
      SENTRY_DSN: 'https://key@sentry.io/1',
      AZURE_STORAGE_CONNECTION_STRING: 'AccountKey=abc',
      SESSION_COOKIE: 'sid=abc123',
    }
    assert.deepEqual(secretValues(env).sort(), Object.values(env).sort())
  })

  it('leaves ordinary variables alone', () => {
    const env = {
      PATH: '/usr/bin:/bin',
      HOME: '/tmp',
      MONKEY: 'banana',
      KEYBOARD_LAYOUT: 'us-intl',
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      TMPDIR: '/tmp',
      TURKEY: 'gobble',
      HOCKEYPUCK: 'rubber',
      PWD: '/work/project',
      OLDPWD: '/work',
      COMPASS_DIR: '/opt/compass',
      PASSENGER_APP_ENV: 'production',
      BYPASS_CACHE: 'yes1',
      DATABASE: 'app',
    }
    assert.deepEqual(secretValues(env), [])
  })

  it('skips values shorter than 4 characters', () => {
    assert.deepEqual(secretValues({ API_TOKEN: 'abc', DB_PASSWORD: 'abcd', MY_KEY: '', GITHUB_TOKEN: 'x' }), [
      'abcd',
    ])
  })

  it('mixed: only the secret-looking, long-enough values, in env order', () => {
    const env = { PATH: '/usr/bin', GITHUB_TOKEN: 'ghp_123', HOME: '/tmp', MY_KEY: 'k3y!', SHORT_TOKEN: 'ab' }
    assert.deepEqual(secretValues(env), ['ghp_123', 'k3y!'])
  })

  it('no name every sandbox has looks secret: secretValues skips them without running the pattern', () => {
    for (const name of Object.keys(baseEnv())) assert.equal(SECRET_NAME.test(name), false, name)
  })

  it('an empty environment gives nothing', () => {
    assert.deepEqual(secretValues({}), [])
  })

  it('author variables are not mistaken for auth secrets', () => {
    assert.deepEqual(secretValues({ GIT_AUTHOR_NAME: 'Jane Doe', GIT_AUTHOR_EMAIL: 'jane@example.com' }), [])
    assert.deepEqual(secretValues({ AUTH: 'abcd', BASIC_AUTH: 'u:pw', HTTP_AUTHORIZATION: 'Bearer x' }), [
      'abcd',
      'u:pw',
      'Bearer x',
    ])
  })
})

describe('Redaction: linear time, counted', () => {
  // `scanned` counts the characters each engine call was handed (a whole slice, however early the engine
  // stops): the bound holds for the worst the engine could do, without timing anything.
  const MiB = 1024 * 1024

  /** Push `text` in pieces of `size` (all at once when 0), flush; returns what came out and the count per character. */
  function scan(redact: (string | RegExp)[], text: string, size = 0) {
    const r = new Redactor(redact)
    let out = ''
    if (size === 0) out += r.push(text)
    else for (let at = 0; at < text.length; at += size) out += r.push(text.slice(at, at + size))
    out += r.flush()
    return { out, perChar: r.redaction.scanned / text.length }
  }

  it('/a.*b/ on 64 MiB of "a" in one push: about one look at each character, nothing hidden', () => {
    const text = 'a'.repeat(64 * MiB)
    const { out, perChar } = scan([/a.*b/], text)
    assert.ok(out === text, 'nothing hidden')
    assert.ok(perChar <= 1.2, `${perChar} characters scanned per character`)
  })

  it('/(a+)+$/ on "a": hidden in window-long cuts, two looks at each character', () => {
    const text = 'a'.repeat(4 * MiB)
    const { out, perChar } = scan([/(a+)+$/], text)
    assert.equal(out, REDACTED)
    assert.ok(perChar <= 2.2, `${perChar} characters scanned per character`)
  })

  it('many tiny pushes cost what one push does: the held tail is never scanned again', () => {
    const text = `${'a'.repeat(MiB / 4)}b`
    for (const redact of [[/a.*b/], [/x+y/], ['aaaaaaaaaaaaaaab'], [/(a+)+$/]]) {
      const one = scan(redact, text)
      const tiny = scan(redact, text, 1)
      const small = scan(redact, text, 7)
      // Where a match longer than the window is cut may differ; shorter ones are found alike.
      if (String(redact) !== '/a.*b/') {
        assert.equal(tiny.out, one.out, `${redact}: same text`)
        assert.equal(small.out, one.out, `${redact}: same text`)
      }
      // /a.*b/ matches all of it: hidden in window-long cuts from where a window fits; the rest scans on.
      const matches = String(redact) !== '/x+y/'
      for (const { out } of [one, tiny, small])
        assert.equal(out.includes(REDACTED), matches, `${redact}: hidden`)
      for (const [name, { perChar }] of Object.entries({ one, tiny, small })) {
        assert.ok(perChar <= 2.2, `${redact} ${name}: ${perChar} characters scanned per character`)
      }
    }
  })

  it('a literal secret on text made of its own prefixes: one step per character (V8 takes O(text × secret))', () => {
    const secret = `${'x'.repeat(2048)}Y${'x'.repeat(2047)}`
    const text = 'x'.repeat(8 * MiB)
    const { out, perChar } = scan([secret], text)
    assert.ok(out === text)
    assert.equal(perChar, 1)
    const hit = scan([secret, 'other'], `${text}${secret}`)
    assert.equal(hit.out, `${text}${REDACTED}`)
  })

  it('the worst a RegExp can cost: every character a match decided only at the window end', () => {
    // /.*[^A-Z]|[A-Z]/ on "AAAA": each one-character match is known only when .* has run to the window's
    // end; so each costs a slice of two windows. Linear still: at most 2 × 256 + 1 looks per character.
    const text = 'A'.repeat(20_000)
    const { out, perChar } = scan([/.*[^A-Z]|[A-Z]/], text)
    assert.equal(out, REDACTED)
    assert.ok(perChar <= 2 * 256 + 1, `${perChar} characters scanned per character`)
  })

  it('an output buffer scans each character twice (its stream, then the interleaving), however it arrives', async () => {
    const { OutputBuffer } = await import('../../src/run/output.js')
    const bytes = Buffer.from(`${'a'.repeat(4 * MiB)}b`)
    for (const size of [bytes.length, 65536, 17]) {
      for (const redact of [[/a.*b/], ['aaaaaaaaab']] as (string | RegExp)[][]) {
        const redaction = new Redaction(redact)
        const out = new OutputBuffer(bytes.length, () => {}, redaction)
        for (let at = 0; at < bytes.length; at += size) {
          out.push(at % (2 * size) === 0 ? 'stdout' : 'stderr', bytes.subarray(at, at + size))
        }
        out.finish()
        const perChar = redaction.scanned / bytes.length
        assert.ok(
          perChar <= 4.4,
          `${redact} in pieces of ${size}: ${perChar} characters scanned per character`,
        )
      }
    }
  })
})

describe('MarkerRuns: where markers go when two streams interleave', () => {
  it('a hidden run of one stream broken by clear text of the other gets a second marker', () => {
    // Without it, the interleaved text would read "[REDACTED]SECRET": stdout's second hidden run would
    // join stderr's "SEC" and "RET" with nothing between.
    const runs = new MarkerRuns<'stdout' | 'stderr'>()
    const written: [string, string][] = []
    const write = (stream: string, text: string) => written.push([stream, text])
    runs.emit('stdout', 'k1k1', true, write)
    runs.emit('stderr', 'SEC', false, write)
    runs.emit('stdout', 'k1k1', true, write)
    runs.emit('stderr', 'RET', false, write)
    runs.closeAll(write)
    const all = written.map(([, t]) => t).join('')
    assert.equal(all, `${REDACTED}SEC${REDACTED}RET`)
    const own = (s: string) =>
      written
        .filter(([w]) => w === s)
        .map(([, t]) => t)
        .join('')
    assert.equal(own('stdout'), REDACTED + REDACTED)
    assert.equal(own('stderr'), 'SECRET', "stderr's own view was whole in its own scan, which hides it")
  })
})
