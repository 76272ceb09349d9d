// Redaction end to end: every kept copy and every live chunk, secrets split across writes included.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type OutputChunk, PolicyError, type RunOptions, run, start } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

const SECRET = 'tok-9f8e7d6c5b4a'

for (const tier of TIERS) {
  describe(`redaction (${tier} tier)`, { skip: skipTier(tier) }, () => {
    it('secret env values and listed patterns never reach stdout, stderr, output or live chunks', async () => {
      const chunks: OutputChunk[] = []
      // The secret arrives split across two writes 100 ms apart, on both streams.
      const script = `printf 'a ${SECRET.slice(0, 7)}'; sleep 0.1; printf '${SECRET.slice(7)} b\\n'; echo "err $GITHUB_TOKEN hunter42" >&2`
      const r = await run(['sh', '-c', script], {
        isolation: tier,
        env: { GITHUB_TOKEN: SECRET },
        redact: [/hunter\d+/],
        onOutput: (c) => chunks.push(c),
      })
      assert.equal(r.stdout, 'a [REDACTED] b\n')
      assert.equal(r.stderr, 'err [REDACTED] [REDACTED]\n')
      for (const text of [r.output, ...chunks.map((c) => c.data)]) {
        assert.ok(!text.includes(SECRET.slice(0, 7)) || !text.includes(SECRET.slice(7)), `leak in ${text}`)
        assert.ok(!text.includes('hunter42'), `leak in ${text}`)
      }
      assert.ok(
        !chunks
          .map((c) => c.data)
          .join('')
          .includes(SECRET),
        'joined live chunks leak',
      )
    })

    it('byte counts and the cap count what the sandbox wrote, not the redacted text', async () => {
      const r = await run(['sh', '-c', `printf '${SECRET}${SECRET}'`], {
        isolation: tier,
        redact: [SECRET],
        limits: { maxOutputBytes: SECRET.length * 2 },
      })
      assert.equal(r.outputBytes, SECRET.length * 2)
      assert.equal(r.stdout, '[REDACTED]', 'one run of hidden characters, one marker')
      assert.equal(r.status, 'ok')
    })

    it('the live iterator of start() is redacted too', async () => {
      const handle = start(['sh', '-c', `echo ${SECRET}`], { isolation: tier, redact: [SECRET] })
      const seen: string[] = []
      for await (const chunk of handle.output) seen.push(chunk.data)
      await handle.result
      assert.equal(seen.join(''), '[REDACTED]\n')
    })
  })
}

// The auditor's cases: a secret split across the two streams, and every other string a run hands back.
const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const HALF = 7 // SECRET = tok-9f8 | e7d6c5b4a

/** Fails naming the view in which `secret` appears whole. */
function assertNowhere(views: Record<string, string>, secret: string): void {
  for (const [name, text] of Object.entries(views)) {
    assert.ok(!text.includes(secret), `${name} shows the secret whole: ${JSON.stringify(text)}`)
  }
}

/** The views a live consumer makes of chunks: each stream's file, and a terminal with 2>&1. */
function liveViews(chunks: readonly OutputChunk[], prefix: string): Record<string, string> {
  const join = (cs: readonly OutputChunk[]) => cs.map((c) => c.data).join('')
  return {
    [`${prefix} stdout`]: join(chunks.filter((c) => c.stream === 'stdout')),
    [`${prefix} stderr`]: join(chunks.filter((c) => c.stream === 'stderr')),
    [`${prefix} 2>&1`]: join(chunks),
  }
}

for (const tier of TIERS) {
  describe(`redaction across streams and fields (${tier} tier)`, { skip: skipTier(tier) }, () => {
    // printf writes at once (no stdio buffer to flush); the sleeps make each half its own read. Each half
    // is followed by exactly the window a redactor holds back (15 characters after a 16-character literal,
    // 256 after a RegExp), so a redactor per stream releases each half up to its end, one after the other.
    const pad = (n: number) => ' '.repeat(n)
    const split = (n: number) =>
      `printf 'a ${SECRET.slice(0, HALF)}${pad(n)}'; sleep 0.1; printf '${SECRET.slice(HALF)} b${pad(n)}' >&2; sleep 0.1; echo`
    const splitBack = (n: number) =>
      `printf '${SECRET.slice(0, HALF)}${pad(n)}' >&2; sleep 0.1; printf '${SECRET.slice(HALF)}${pad(n)}'; sleep 0.1; echo >&2`
    const variants: [RunOptions, number][] = [
      [{ redact: [SECRET] }, SECRET.length - 1],
      [{ env: { API_TOKEN: SECRET } }, SECRET.length - 1],
      [{ redact: [/tok-[0-9a-f]{12}/] }, 256],
    ]

    for (const [name, script] of [
      ['stdout then stderr', split],
      ['stderr then stdout', splitBack],
    ] as const) {
      it(`a secret split ${name} is hidden in output and in the live chunks, interleaved and per stream`, async () => {
        for (const [redact, window] of variants) {
          const chunks: OutputChunk[] = []
          const r = await run(['sh', '-c', script(window)], {
            isolation: tier,
            ...redact,
            onOutput: (c) => chunks.push(c),
          })
          assert.equal(r.status, 'ok')
          assertNowhere(
            { stdout: r.stdout, stderr: r.stderr, output: r.output, ...liveViews(chunks, 'onOutput') },
            SECRET,
          )
          assert.equal(r.output, chunks.map((c) => c.data).join(''), 'output is the live chunks')
          const handle = start(['sh', '-c', script(window)], { isolation: tier, ...redact })
          const seen: OutputChunk[] = []
          for await (const chunk of handle.output) seen.push(chunk)
          await handle.result
          assertNowhere(liveViews(seen, 'start()'), SECRET)
        }
      })
    }

    it('the CLI with 2>&1 shows no secret split across its stdout and stderr', () => {
      for (const flags of [
        ['--redact', SECRET],
        ['--env', `API_TOKEN=${SECRET}`],
      ]) {
        const script = split(SECRET.length - 1)
        const r = spawnSync(
          'sh',
          [
            '-c',
            '"$0" "$@" 2>&1',
            process.execPath,
            CLI,
            'run',
            '--isolation',
            tier,
            ...flags,
            '--',
            'sh',
            '-c',
            script,
          ],
          { encoding: 'utf8', timeout: 30_000 },
        )
        assert.equal(r.status, 0, r.stdout)
        assert.ok(!r.stdout.includes(SECRET), `2>&1 shows the secret: ${JSON.stringify(r.stdout)}`)
      }
    })

    it('log entry keys, nested, are redacted like their values', async () => {
      const line = JSON.stringify({
        level: 'info',
        msg: 'keys',
        [SECRET]: 1,
        nested: { [SECRET]: { [SECRET]: SECRET } },
      })
      const r = await run(['sh', '-c', `echo '${line}' >&$CORDON_LOG_FD`], {
        isolation: tier,
        redact: [SECRET],
      })
      assert.equal(r.logs.length, 1)
      assert.ok(!JSON.stringify(r.logs).includes(SECRET), JSON.stringify(r.logs))
    })

    it('a violation naming the secret (a program called after it, not found) does not show it', async () => {
      for (const options of [{ redact: [SECRET] }, { env: { API_TOKEN: SECRET } }] as RunOptions[]) {
        const r = await run([SECRET], { isolation: tier, ...options })
        assert.equal(r.status, 'not-found')
        assert.ok(!JSON.stringify(r).includes(SECRET), JSON.stringify(r.violation))
        const cli = spawnSync(
          process.execPath,
          [CLI, 'run', '--isolation', tier, '--redact', SECRET, '--', SECRET],
          {
            encoding: 'utf8',
            timeout: 30_000,
          },
        )
        assert.equal(cli.status, 127)
        assert.ok(!cli.stderr.includes(SECRET), `the CLI's summary shows the secret: ${cli.stderr}`)
        const json = spawnSync(
          process.execPath,
          [CLI, 'run', '--json', '--isolation', tier, '--redact', SECRET, '--', SECRET],
          { encoding: 'utf8', timeout: 30_000 },
        )
        assert.ok(!json.stdout.includes(SECRET), `--json shows the secret: ${json.stdout}`)
      }
    })
  })
}

describe('redaction of what run() throws', () => {
  it('a PolicyError about the plan quoting the secret (a cwd named after it) hides it', async () => {
    await assert.rejects(
      run(['true'], { cwd: `/nonexistent/${SECRET}`, redact: [SECRET] }),
      (e: unknown) => e instanceof PolicyError && e.field === 'cwd' && !e.message.includes(SECRET),
    )
  })
})

describe('redaction of option errors', () => {
  it('an option error quoting a secret value (an env secret with a NUL, a command) hides it', async () => {
    for (const [command, options] of [
      [['true'], { env: { API_TOKEN: `${SECRET}\0` } }],
      [[`${SECRET}\0`], { redact: [SECRET] }],
      [['true'], { redact: [SECRET], env: { [`BAD ${SECRET}`]: 'x' } }],
    ] as [string[], RunOptions][]) {
      await assert.rejects(run(command, options), (e: unknown) => {
        assert.ok(e instanceof PolicyError, String(e))
        assert.ok(!e.message.includes(SECRET), e.message)
        return true
      })
    }
  })
})

describe('redaction of network events (namespace tier)', { skip: skipTier('namespace') }, () => {
  it('a refused host containing the secret is redacted in result.network', async () => {
    const host = `${SECRET}.example`
    const r = await run(['sh', '-c', `curl -sS --max-time 5 -p http://${host}/ || true; echo done`], {
      isolation: 'namespace',
      network: { allow: ['localhost'] },
      redact: [SECRET],
    })
    assert.equal(r.status, 'ok')
    assert.equal(r.network.length, 1, JSON.stringify(r.network))
    assert.equal(r.network[0]?.allowed, false)
    assert.ok(!JSON.stringify(r).includes(SECRET), JSON.stringify(r.network))
  })

  // A host is shown as the proxy parsed it, lower-cased: a secret with capitals came out whole but for case.
  it('a host containing a secret with capitals is redacted, though the proxy lower-cased it', async () => {
    const mixed = 'Tok-9F8e7D6c5B4a'
    const r = await run(['sh', '-c', `curl -sS --max-time 5 -p "http://$API_TOKEN.example/" || true`], {
      isolation: 'namespace',
      network: { allow: ['localhost'] },
      env: { API_TOKEN: mixed },
    })
    assert.equal(r.network.length, 1, JSON.stringify(r.network))
    assert.equal(r.network[0]?.host, '[REDACTED].example')
    assert.ok(!JSON.stringify(r).toLowerCase().includes(mixed.toLowerCase()), JSON.stringify(r.network))
  })

  // A refused host is shown escaped (`\u00c3\u00a4` for the UTF-8 bytes of ä): escaped before it was
  // redacted, a secret with a character outside ASCII no longer matched and came out in that spelling.
  it('a secret outside ASCII in a SOCKS5 name is redacted in the bytes sent, before they are escaped', async () => {
    const secret = 'pässwört-9F8e7D'
    const socks = String.raw`
import os, socket
name = (os.environ['API_TOKEN'] + '.example').encode()
s = socket.create_connection(('127.0.0.1', 1080), timeout=5)
s.sendall(b'\x05\x01\x00')
s.recv(2)
s.sendall(bytes([5, 1, 0, 3, len(name)]) + name + (80).to_bytes(2, 'big'))
print(s.recv(10)[1])
`
    const r = await run(['python3', '-c', socks], {
      isolation: 'namespace',
      network: { allow: ['localhost'] },
      env: { API_TOKEN: secret },
    })
    assert.equal(r.stdout, '2\n', r.stderr)
    assert.deepEqual(
      r.network.map((e) => [e.host, e.code]),
      [['[REDACTED].example', 'malformed-host']],
    )
  })
})
