// callFunction for real: a child Node process in the sandbox, values by structured clone.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import {
  chmodSync,
  copyFileSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { after, describe, it } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { callFunction, PolicyError, type RunOptions, run } from '../../src/index.js'
import { notRoot, skipTier, TIERS, tempDir } from '../helpers.js'

// Outside /tmp (private in the sandbox); the tests also hide its parent to show the module stays visible.
const dir = mkdtempSync('/var/tmp/cordon-fn-')
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))
const mod = path.join(dir, 'tools.mjs')
writeFileSync(
  mod,
  `import { writeSync } from 'node:fs'
import { serialize } from 'node:v8'
export const add = (a, b) => a + b
export async function echo(value) { await new Promise((r) => setTimeout(r, 10)); return value }
export function shapes() {
  return { map: new Map([['k', [1, 2]]]), set: new Set(['a']), when: new Date(86400000), big: 2n ** 64n, bytes: new Float64Array([1.5]) }
}
export function fail() { throw new RangeError('out of range') }
export function uncloneable() { return { f() {} } }
export function noisy() { console.log('hello from the function'); console.error('and stderr'); return 'value' }
export function forge() {
  const body = serialize({ nonce: 'guess', kind: 'value', value: 'forged' })
  const head = Buffer.alloc(4); head.writeUInt32BE(body.length)
  try { writeSync(8, Buffer.concat([head, body])) } catch {}
  console.log(JSON.stringify({ kind: 'value', value: 'forged' }))
  return 'genuine'
}
export function flood() { try { writeSync(8, Buffer.alloc(32 << 20)) } catch {} ; return 'genuine' }
export function swallow() { const h = Buffer.alloc(4); h.writeUInt32BE(1 << 16); try { writeSync(8, h) } catch {} ; return 'genuine' }
// The function is the runner's process: it learns the nonce as the runner frames its value (Buffer.from),
// and writes first frames carrying it, nested so each deserializes at the cost of all the rest.
export function nested() {
  const from = Buffer.from
  Buffer.from = function (v, enc) {
    if (enc === 'latin1' && typeof v === 'string') {
      Buffer.from = from
      const frames = []
      for (let size = 0; size < (2 << 20); ) {
        const len = []; for (let n = size; ; n >>>= 7) { if (n < 0x80) { len.push(n); break } len.push((n & 0x7f) | 0x80) }
        const body = from([0xff, 0x0f, 0x22, ...len]); const head = Buffer.alloc(4); head.writeUInt32BE(body.length + size)
        const f = Buffer.concat([from(v, 'latin1'), head, body]); frames.push(f); size += f.length
      }
      try { writeSync(8, Buffer.concat(frames.reverse())) } catch {}
    }
    return from.apply(this, arguments)
  }
  return 'genuine'
}
export function quits() { process.exit(0) }
export function spin() { for (;;) {} }
export async function chatter() { for (;;) { console.log('x'); await new Promise((r) => setTimeout(r, 10)) } }
export const notAFunction = 42
export function leak(s) {
  return { [s]: s, text: \`x \${s} y\`, map: new Map([[s, s], ['k', { [s]: [s] }]]), set: new Set([s, \`a\${s}\`]),
    arr: [[s]], err: new RangeError(\`inner \${s}\`), bytes: new TextEncoder().encode(\`<\${s}>\`), buf: new TextEncoder().encode(s).buffer, n: 1 }
}
export function throwSecret(s) { throw new TypeError(\`bad \${s}\`) }
export function throwString(s) { throw \`plain \${s}\` }
export function sparse() { const a = []; a.length = 2 ** 32 - 1; a[7] = 'x'; return a }
export function laughs() { let v = ['lol']; for (let i = 0; i < 64; i++) v = [v, v]; return v }
export function padded() { writeSync(8, Buffer.alloc(16 * 1024 * 1024)); const a = []; a.length = 2 ** 25; return a }
export function shared() { const row = { id: 1 }; const self = { row, again: row }; self.me = self; return self }
`,
)
writeFileSync(path.join(dir, 'broken.mjs'), 'export const x = ;\n')

/** Where `secret` appears in `value` (strings, keys, Map/Set, Errors, bytes as UTF-8), or null. */
function whereShown(value: unknown, secret: string, at = 'value', seen = new Set<unknown>()): string | null {
  if (typeof value === 'string') return value.includes(secret) ? at : null
  if (value === null || typeof value !== 'object' || seen.has(value)) return null
  seen.add(value)
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
    const bytes =
      value instanceof ArrayBuffer
        ? new Uint8Array(value)
        : new Uint8Array(value.buffer, value.byteOffset, value.byteLength)
    return Buffer.from(bytes).toString('latin1').includes(secret) ? at : null
  }
  const entries: [unknown, unknown][] =
    value instanceof Map
      ? [...value]
      : value instanceof Set
        ? [...value].map((v) => [null, v])
        : value instanceof Error
          ? [
              [null, value.name],
              [null, value.message],
              [null, value.stack],
            ]
          : Object.entries(value)
  for (const [k, v] of entries) {
    const found =
      whereShown(k, secret, `${at} key`, seen) ?? whereShown(v, secret, `${at}.${String(k)}`, seen)
    if (found) return found
  }
  return null
}

for (const tier of TIERS) {
  describe(`callFunction (${tier} tier)`, { skip: skipTier(tier) }, () => {
    const isolation = tier

    it('returns the value; arguments and value cross by structured clone', async () => {
      assert.equal((await callFunction(mod, 'add', [2, 3], { isolation })).value, 5)
      if (tier === 'namespace') {
        // The module's directory stays readable even when a hide or strict mode would cover it.
        assert.equal((await callFunction(mod, 'add', [2, 3], { isolation, hide: ['/var/tmp'] })).value, 5)
        assert.equal((await callFunction(mod, 'add', [2, 3], { isolation, readable: [] })).value, 5)
      }
      const sent = { m: new Map([[1, new Set([2n])]]), d: new Date(5), u: new Uint8Array([7]) }
      const r = await callFunction(mod, 'echo', [sent], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      assert.deepEqual(r.value, sent)
      const shapes = await callFunction<Record<string, unknown>>(pathToFileURL(mod), 'shapes', [], {
        isolation,
      })
      assert.deepEqual(shapes.value, {
        map: new Map([['k', [1, 2]]]),
        set: new Set(['a']),
        when: new Date(86400000),
        big: 2n ** 64n,
        bytes: new Float64Array([1.5]),
      })
    })

    it('a thrown error comes back as { name, message, stack }', async () => {
      const r = await callFunction(mod, 'fail', [], { isolation })
      assert.equal(r.status, 'nonzero-exit')
      assert.equal(r.error?.name, 'RangeError')
      assert.equal(r.error?.message, 'out of range')
      assert.match(r.error?.stack ?? '', /tools\.mjs/)
      assert.equal('value' in r, false)
    })

    it('a missing export, a module that does not load, a value that cannot be cloned: clear errors naming them', async () => {
      const missing = await callFunction(mod, 'nope', [], { isolation })
      assert.equal(missing.status, 'error')
      assert.match(missing.violation!.message, /no exported function "nope"/)
      const notFn = await callFunction(mod, 'notAFunction', [], { isolation })
      assert.match(notFn.violation!.message, /"notAFunction"/)
      const broken = await callFunction(path.join(dir, 'broken.mjs'), 'x', [], { isolation })
      assert.equal(broken.status, 'error')
      assert.equal(broken.violation?.limit, 'load-error')
      assert.equal(broken.error?.name, 'SyntaxError')
      const unclone = await callFunction(mod, 'uncloneable', [], { isolation })
      assert.equal(unclone.status, 'error')
      assert.match(unclone.violation!.message, /return value of "uncloneable" cannot be cloned/)
    })

    it('what the function prints is output, never the return value; a forged reply is ignored', async () => {
      const noisy = await callFunction(mod, 'noisy', [], { isolation })
      assert.equal(noisy.value, 'value')
      assert.equal(noisy.stdout, 'hello from the function\n')
      assert.equal(noisy.stderr, 'and stderr\n')
      const forged = await callFunction(mod, 'forge', [], { isolation })
      assert.equal(forged.value, 'genuine')
    })

    it('junk on the reply channel neither hides the value nor blocks the host', async () => {
      // 32 MiB of zeros read as frames of length 0 each cost a failed deserialize: ~20 s of the host's
      // event loop; a stray length header swallowed the reply after it (status ok, no value).
      const lag = monitorEventLoopDelay({ resolution: 20 })
      lag.enable()
      const flood = await callFunction(mod, 'flood', [], { isolation })
      // A timer of its own must fire before the histogram sees a stall that ended the await.
      await new Promise((r) => setTimeout(r, 50))
      lag.disable()
      assert.equal(flood.status, 'ok', flood.stderr)
      assert.equal(flood.value, 'genuine')
      assert.ok(lag.max / 1e6 < 2000, `the host's event loop stalled ${(lag.max / 1e6).toFixed(0)} ms`)
      const swallow = await callFunction(mod, 'swallow', [], { isolation })
      assert.equal(swallow.status, 'ok', swallow.stderr)
      assert.equal(swallow.value, 'genuine')
    })

    it('frames a function writes with the nonce it learned cost the host one pass, and no reply is trusted', async () => {
      // 2 MiB of frames nested in one another: a deserialize each, as long as the rest, held the host's
      // event loop ~44 s. Only the runner's own process knows the nonce: what it wrote besides is forged.
      const lag = monitorEventLoopDelay({ resolution: 20 })
      lag.enable()
      const started = performance.now()
      const r = await callFunction(mod, 'nested', [], { isolation })
      const ms = performance.now() - started
      // A timer of its own must fire before the histogram sees a stall that ended the await.
      await new Promise((r) => setTimeout(r, 50))
      lag.disable()
      assert.ok(ms < 15_000, `the call took ${ms.toFixed(0)} ms`)
      assert.ok(lag.max / 1e6 < 2000, `the host's event loop stalled ${(lag.max / 1e6).toFixed(0)} ms`)
      assert.equal(r.status, 'error')
      assert.equal(r.violation?.limit, 'reply')
      assert.match(r.violation?.message ?? '', /forged/)
      assert.equal('value' in r, false)
    })

    it('a function that ends its process without a reply is an error, never ok without a value', async () => {
      // Exit 0 and no reply read as `ok` with value undefined: the same as a function returning undefined.
      const quits = await callFunction(mod, 'quits', [], { isolation })
      assert.equal(quits.status, 'error')
      assert.equal(quits.violation?.limit, 'reply')
      assert.match(quits.violation?.message ?? '', /without a reply/)
      assert.equal('value' in quits, false)
      const r = await callFunction(mod, 'echo', [undefined], { isolation })
      assert.equal(r.status, 'ok', 'undefined returned is a value like any other')
      assert.equal(r.value, undefined)
    })

    it('a secret in the value or what was thrown is redacted: strings, keys, Map, Set, Error, bytes', async () => {
      const secret = 'tok-5e3c2a1b0f9d'
      for (const options of [
        { redact: [secret] },
        { env: { API_TOKEN: secret } },
        { redact: [/tok-[0-9a-f]{12}/] },
      ] as RunOptions[]) {
        const r = await callFunction<Record<string, unknown>>(mod, 'leak', [secret], {
          isolation,
          ...options,
        })
        assert.equal(r.status, 'ok', r.stderr)
        assert.equal(whereShown(r.value, secret), null)
        assert.equal(r.value?.n, 1, 'the rest of the value is intact')
        assert.equal(
          (r.value as { bytes: Uint8Array }).bytes.length,
          secret.length + 2,
          'bytes keep their length',
        )
        for (const name of ['throwSecret', 'throwString']) {
          const thrown = await callFunction(mod, name, [secret], { isolation, ...options })
          assert.equal(thrown.status, 'nonzero-exit')
          assert.ok(thrown.error, name)
          assert.equal(whereShown(thrown, secret), null, `${name}: ${JSON.stringify(thrown.error)}`)
        }
      }
    })

    it('a value that would expand far past its reply (a sparse array, shared references) is refused', async () => {
      // A few bytes that a host walking the value would turn into 2^32 slots or 2^64 nodes: the redaction
      // ran out of memory on the first, JSON on the second. Refused before anything walks them, quickly.
      for (const name of ['sparse', 'laughs']) {
        for (const redact of [[], ['sekrit']]) {
          const started = Date.now()
          const r = await callFunction(mod, name, [], { isolation, redact })
          assert.equal(r.status, 'error', `${name}: ${r.status}`)
          assert.equal(r.violation?.limit, 'reply')
          assert.match(r.violation?.message ?? '', /expand/)
          assert.equal(r.value, undefined)
          assert.ok(Date.now() - started < 20_000, `${name} took ${Date.now() - started} ms`)
        }
      }
      // Junk the function writes on the reply channel besides its reply buys it no room: the bound is the
      // reply's own bytes (16 MiB of zeros made room for 2^26 slots, and 2^25 of them passed).
      const padded = await callFunction(mod, 'padded', [], { isolation })
      assert.equal(padded.status, 'error', `padded: ${padded.status}`)
      assert.match(padded.violation?.message ?? '', /expand/)
      // Sharing within reason, and a cycle, still come back as the structured clone they are.
      const r = await callFunction<{ row: object; again: object; me: object }>(mod, 'shared', [], {
        isolation,
      })
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.value?.row, r.value?.again)
      assert.equal(r.value?.me, r.value)
    })

    it('limits apply: a function that never returns times out', async () => {
      const r = await callFunction(mod, 'spin', [], { isolation, limits: { wallTimeMs: 500 } })
      assert.equal(r.status, 'timeout')
      assert.equal('value' in r, false)
    })
  })
}

describe('callFunction input errors', () => {
  it('throws PolicyError for a module that is not a file and for uncloneable arguments', async () => {
    await assert.rejects(
      callFunction('/no/such/module.mjs', 'f'),
      (e: unknown) => e instanceof PolicyError && e.field === 'module',
    )
    await assert.rejects(
      callFunction(mod, 'add', [() => 1]),
      (e: unknown) => e instanceof PolicyError && e.field === 'args',
    )
  })

  it('a module the sandbox user cannot read is refused up front, naming the module', {
    skip: notRoot,
  }, async () => {
    const secret = mkdtempSync('/var/tmp/cordon-private-')
    writeFileSync(path.join(secret, 'm.mjs'), 'export const f = () => 1\n')
    try {
      await assert.rejects(
        callFunction(path.join(secret, 'm.mjs'), 'f'),
        (e: unknown) => e instanceof PolicyError && e.field === 'module' && /not readable/.test(e.message),
      )
    } finally {
      rmSync(secret, { recursive: true, force: true })
    }
  })

  it('cordon not built (no runner) is a result of the call, status error, not an exception', async () => {
    // Under tsx the runner is dist/functions/child.js: moved away for this test, then put back.
    const runner = fileURLToPath(new URL('../../dist/functions/child.js', import.meta.url))
    const aside = `${runner}.aside`
    renameSync(runner, aside)
    try {
      const r = await callFunction(mod, 'add', [1, 2])
      assert.equal(r.status, 'error')
      assert.equal(r.violation?.kind, 'error')
      assert.equal(r.violation?.limit, 'runner')
      assert.match(r.violation?.message ?? '', /npm run build/)
      assert.equal(r.value, undefined)
      // Invalid input still throws first: the rule is by what is wrong, not by what is missing.
      await assert.rejects(callFunction(mod, 'add', [], { limits: { memoryBytes: 'lots' } }), PolicyError)
    } finally {
      renameSync(aside, runner)
    }
  })

  it('overhead against run(node -e "")', async () => {
    // Not a timing assertion (the bench measures); this only checks both paths work back to back.
    const a = await run([process.execPath, '-e', ''])
    const b = await callFunction(mod, 'add', [1, 1])
    assert.equal(a.status, 'ok', a.stderr)
    assert.equal(b.value, 2)
  })
})

describe('cordon call', () => {
  const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
  const call = (...args: string[]) =>
    spawnSync(process.execPath, [CLI, 'call', ...args], { encoding: 'utf8' })

  it('prints the value; what the function prints goes to stderr', () => {
    const r = call(`${mod}#noisy`)
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, 'value\n')
    assert.match(r.stderr, /hello from the function/)
  })

  it('--args passes arguments; --json prints the result with the value', () => {
    const r = call(`${mod}#add`, '--args', '[40, 2]', '--json')
    const result = JSON.parse(r.stdout)
    assert.equal(result.value, 42)
    assert.equal(result.status, 'ok')
  })

  it('a value with a cycle prints with "[Circular]" where it closes, with --json too', () => {
    // A structured clone may hold cycles: JSON.stringify threw, and cordon exited 125 with a stack.
    const r = call(`${mod}#shared`)
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(JSON.parse(r.stdout), { row: { id: 1 }, again: { id: 1 }, me: '[Circular]' })
    const j = call(`${mod}#shared`, '--json')
    assert.equal(j.status, 0, j.stderr)
    assert.deepEqual(JSON.parse(j.stdout).value, { row: { id: 1 }, again: { id: 1 }, me: '[Circular]' })
  })

  it('the printed value and stack show no secret', () => {
    const secret = 'tok-5e3c2a1b0f9d'
    const value = call(`${mod}#leak`, '--args', JSON.stringify([secret]), '--redact', secret)
    assert.equal(value.status, 0, value.stderr)
    assert.ok(!value.stdout.includes(secret), value.stdout)
    const thrown = call(`${mod}#throwSecret`, '--args', JSON.stringify([secret]), '--redact', secret)
    assert.equal(thrown.status, 1)
    assert.match(thrown.stderr, /TypeError: bad/)
    assert.ok(!thrown.stderr.includes(secret), thrown.stderr)
  })

  it('exit 1 with the stack when the function throws; 125 naming --args for bad JSON', () => {
    const thrown = call(`${mod}#fail`)
    assert.equal(thrown.status, 1)
    assert.match(thrown.stderr, /RangeError: out of range/)
    const bad = call(`${mod}#add`, '--args', '{1')
    assert.equal(bad.status, 125)
    assert.match(bad.stderr, /--args/)
  })

  for (const [args, flag] of [
    [[`${mod}#add`, '--args', '{1'], '--args'],
    [[`${mod}#add`, '--bogus'], '--bogus'],
    [[`${mod}#add`, '--memory', 'banana'], '--memory'],
    [['no-export-named'], 'target'],
  ] as const) {
    it(`--json: 125 and one error result naming ${flag} for ${args.slice(1).join(' ') || args[0]}`, () => {
      const r = call('--json', ...args)
      assert.equal(r.status, 125, r.stderr)
      assert.ok(r.stderr.includes(flag), `the message still goes to stderr: ${r.stderr}`)
      const lines = r.stdout.split('\n')
      assert.equal(lines.length, 2, `exactly one line on stdout: ${JSON.stringify(r.stdout)}`)
      const result = JSON.parse(lines[0]!)
      assert.equal(result.status, 'error')
      assert.equal(result.violation.limit, flag)
    })
  }

  it('141, quietly, and the sandbox stopped when the reader closes its stderr', async () => {
    const child = spawn(process.execPath, [CLI, 'call', `${mod}#chatter`, '--timeout', '60s'])
    let printed = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => (printed += s))
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    try {
      await new Promise((resolve) => child.stderr.once('data', resolve))
      child.stderr.destroy()
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
      assert.equal(code, 141, printed)
      assert.equal(printed, '', 'nothing printed after the stderr closed')
      const left = spawnSync('find', ['/sys/fs/cgroup', '-maxdepth', '8', '-name', `cordon-${child.pid}-*`], {
        encoding: 'utf8',
      })
      assert.equal(left.stdout, '', 'its cgroup is removed')
    } finally {
      clearTimeout(timer)
    }
  })
})

describe('node beneath a directory the sandbox uid cannot search (nvm under $HOME)', {
  skip: notRoot,
}, () => {
  const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
  const LIBRARY = new URL('../../dist/index.js', import.meta.url).href
  // Root's, 0700, like /root holding ~/.nvm; a hard link (or a copy on another filesystem) of this node.
  const closed = tempDir('cordon-test-nvm-', { parent: '/var/lib', mode: 0o700 })
  const node = path.join(closed, 'bin', 'node')
  mkdirSync(path.dirname(node), { mode: 0o755 })
  try {
    linkSync(realpathSync(process.execPath), node)
  } catch {
    copyFileSync(process.execPath, node)
    chmodSync(node, 0o755)
  }

  for (const isolation of TIERS) {
    describe(isolation, { skip: skipTier(isolation) }, () => {
      it('cordon call works with that node as the host', () => {
        const r = spawnSync(
          node,
          [CLI, 'call', `${mod}#add`, '--args', '[40, 2]', '--isolation', isolation],
          {
            encoding: 'utf8',
          },
        )
        assert.equal(r.status, 0, r.stderr)
        assert.equal(r.stdout, '42\n')
      })

      it('callFunction too, and nothing else of the directory shows', () => {
        const code = `import { callFunction, run } from ${JSON.stringify(LIBRARY)}
const c = await callFunction(${JSON.stringify(mod)}, 'add', [1, 2], { isolation: '${isolation}' })
const r = await run(['ls', '-A', ${JSON.stringify(closed)}], { isolation: '${isolation}', cwd: '/' })
process.stdout.write(JSON.stringify([c.status, c.value, r.stdout.trim()]))`
        const r = spawnSync(node, ['--input-type=module', '-e', code], { encoding: 'utf8' })
        assert.equal(r.status, 0, r.stderr)
        // A plain run shows none of it: node's directory is shown only to the calls that run it.
        assert.deepEqual(JSON.parse(r.stdout), ['ok', 3, ''])
      })
    })
  }
})
