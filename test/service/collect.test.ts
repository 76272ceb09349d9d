import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { redactorFor } from '../../src/index.js'
import { collect, globMatcher } from '../../src/service/collect.js'
import { tempDir } from '../helpers.js'

const redactor = (redact: string[], env: Record<string, string> = {}) => redactorFor({ redact, env })

describe('collect', () => {
  it('globs: * and ? within a name, ** across directories', async () => {
    const test = (glob: string, p: string) => globMatcher(glob)(p)
    assert.ok(test('*.txt', 'a.txt'))
    assert.ok(!test('*.txt', 'd/a.txt'))
    assert.ok(test('**/*.txt', 'a.txt'))
    assert.ok(test('**/*.txt', 'd/e/a.txt'))
    assert.ok(!test('**/*.txt', 'd/e/a.txtx'))
    assert.ok(test('out/?.json', 'out/1.json'))
    assert.ok(!test('out/?.json', 'out/12.json'))
    assert.ok(!test('out/?.json', 'out//.json'))
    assert.ok(test('a+b(1).txt', 'a+b(1).txt'))
    assert.ok(!test('a+b(1).txt', 'aab(1).txt'))
    assert.ok(test('out/**', 'out/a/b/c'))
    assert.ok(!test('out/**', 'outx/a'))
    assert.ok(test('a**b', 'a/x/y/b'))
    assert.ok(test('x/**/y', 'x/y'))
    assert.ok(test('x/**/y', 'x/p/q/y'))
    assert.ok(!test('x/**/y', 'x/py'))
    assert.ok(test('*', 'name'))
    assert.ok(!test('*', 'd/name'))
    assert.ok(test('**', 'a/b'))
  })

  it('collects matching regular files within the cap, never following a symlink', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    const outside = tempDir('cordon-outside-')
    writeFileSync(path.join(outside, 'secret.txt'), 'host secret')
    mkdirSync(path.join(ws, 'out'))
    writeFileSync(path.join(ws, 'out/a.txt'), 'a')
    writeFileSync(path.join(ws, 'out/big.txt'), 'x'.repeat(100))
    writeFileSync(path.join(ws, 'b.log'), 'b')
    symlinkSync(path.join(outside, 'secret.txt'), path.join(ws, 'out/leak.txt'))
    symlinkSync(outside, path.join(ws, 'out/dir'))
    const kept = await collect(ws, into, ['out/**', '*.log'], 50)
    assert.deepEqual(kept.sort(), ['b.log', 'out/a.txt'])
    assert.equal(readFileSync(path.join(into, 'out/a.txt'), 'utf8'), 'a')
    assert.equal(existsSync(path.join(into, 'out/leak.txt')), false)
    assert.equal(existsSync(path.join(into, 'out/big.txt')), false, 'past the cap')
  })

  it('never collects a hard link: the sandbox may link a file it cannot read from outside', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    const outside = tempDir('cordon-outside-')
    writeFileSync(path.join(outside, 'cordon.db'), 'every key')
    linkSync(path.join(outside, 'cordon.db'), path.join(ws, 'db.txt'))
    writeFileSync(path.join(ws, 'own.txt'), 'own')
    assert.deepEqual(await collect(ws, into, ['*.txt'], 1024), ['own.txt'])
    assert.equal(existsSync(path.join(into, 'db.txt')), false)
  })

  it('matches a glob in time linear in the path: no pattern holds the server (its one thread)', async () => {
    // `*a*a…*b` as a backtracking RegExp on a name of 250 a's takes ~C(250, 12) steps: a request could
    // hold the event loop, every key's requests with it, for as long as it liked.
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    writeFileSync(path.join(ws, 'a'.repeat(250)), 'x')
    mkdirSync(path.join(ws, 'a'.repeat(200)))
    writeFileSync(path.join(ws, 'a'.repeat(200), 'a'.repeat(200)), 'y')
    const started = Date.now()
    const evil = [`${'*a'.repeat(12)}*b`, `${'**a'.repeat(12)}*b`, `${'?'.repeat(100)}*${'*a'.repeat(20)}c`]
    assert.deepEqual(await collect(ws, into, [...evil, 'a*'], 1024), ['a'.repeat(250)])
    assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms`)
  })

  it('gives up matching past its work budget, and walks a bounded number of entries', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    for (let i = 0; i < 50; i++) writeFileSync(path.join(ws, `f${i}`), '')
    assert.equal((await collect(ws, into, ['*'], 1024, { maxEntries: 10 })).length, 10)
    const into2 = path.join(tempDir('cordon-files-'), 'run')
    assert.ok((await collect(ws, into2, ['*', '*x'], 1024, { maxSteps: 40 })).length < 50)
  })

  it('charges the budget for what each match costs, a long glob against many names included', async () => {
    // A glob's matcher reset a state table as long as the glob (4096 characters) before each name, and
    // charged it nothing: 100 long globs that fail on the first character against 100 000 names (what a
    // sandbox makes in a second) cost 2 steps a glob a name and held the server's thread for 15 s.
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    for (let i = 0; i < 30_000; i++) writeFileSync(path.join(ws, `f${i}`), '')
    const globs = Array.from({ length: 100 }, () => `z${'x'.repeat(4095)}`)
    const started = Date.now()
    assert.deepEqual(await collect(ws, into, globs, 1024), [])
    assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`)
  })

  it('keeps at most maxFiles files, however small', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    for (let i = 0; i < 20; i++) writeFileSync(path.join(ws, `f${i}`), '')
    assert.equal((await collect(ws, into, ['*'], 1024, { maxFiles: 5 })).length, 5)
  })

  it("redacts the run's secrets from collected files, as the engine redacts its output", async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    writeFileSync(path.join(ws, 'env.txt'), 'A=tok-123456\nB=tok-123456tok-123456\nC=tok-12')
    await collect(ws, into, ['*.txt'], 1024, { redactor: redactor(['tok-123456']) })
    // Masked characters side by side are one [REDACTED], as in the output.
    assert.equal(readFileSync(path.join(into, 'env.txt'), 'utf8'), 'A=[REDACTED]\nB=[REDACTED]\nC=tok-12')
  })

  // A second byte redactor in the worker knew the key's secrets and the request's `redact`, but not the
  // variables the engine redacts by their names: `env: { DB_PASSWORD }` was hidden from the output and
  // kept whole in a collected file.
  it('redacts the secret-named variables of the environment, as the output', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    writeFileSync(path.join(ws, 'dump.txt'), 'pw=hunter2-long user=alice\n')
    await collect(ws, into, ['*.txt'], 1024, {
      redactor: redactor([], { DB_PASSWORD: 'hunter2-long', USER_NAME: 'alice' }),
    })
    assert.equal(readFileSync(path.join(into, 'dump.txt'), 'utf8'), 'pw=[REDACTED] user=alice\n')
  })

  it('finds a secret cut across the chunks a file is read in', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    const secret = 'S3CRET-'.repeat(20)
    // The secret straddles each 64 KiB boundary, at every offset within it.
    const parts: string[] = []
    for (let k = 1; k <= 4; k++) parts.push('x'.repeat(64 * 1024 * k - parts.join('').length - k * 7), secret)
    writeFileSync(path.join(ws, 'big.txt'), parts.join(''))
    await collect(ws, into, ['*.txt'], 10 * 1024 * 1024, { redactor: redactor([secret]) })
    const kept = readFileSync(path.join(into, 'big.txt'), 'utf8')
    assert.ok(!kept.includes('S3CRET'), 'no piece of the secret is kept')
    assert.equal(kept.split('[REDACTED]').length - 1, 4)
  })

  // `redact: ["a"]` made each "a" a 10-byte marker: a 1 MiB file was kept as 10 MiB, past --max-collect,
  // whose check had looked at the size before redaction.
  it('counts the size after redaction against the cap', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    writeFileSync(path.join(ws, 'big.txt'), 'ab'.repeat(512 * 1024)) // 1 MiB, 5.5 MiB redacted
    writeFileSync(path.join(ws, 'one.txt'), 'a b')
    const kept = await collect(ws, into, ['*.txt'], 2 * 1024 * 1024, { redactor: redactor(['a']) })
    assert.deepEqual(kept, ['one.txt'])
    assert.equal(readFileSync(path.join(into, 'one.txt'), 'utf8'), '[REDACTED] b')
    assert.deepEqual(readdirSync(into), ['one.txt'], 'nothing is left of the file that did not fit')
    const into2 = path.join(tempDir('cordon-files-'), 'run')
    assert.deepEqual(await collect(ws, into2, ['big.txt'], 6 * 1024 * 1024, { redactor: redactor(['a']) }), [
      'big.txt',
    ])
    assert.equal(statSync(path.join(into2, 'big.txt')).size, 11 * 512 * 1024)
  })

  // 4 MiB of `ab` with `redact: ["a"]` held a Buffer part per match, on the server's one thread: ~10 s
  // (nothing else was served meanwhile), and 16 MiB ran out of a 256 MiB heap. Streamed in chunks, the
  // file costs a chunk's memory, and the thread is given back after each chunk.
  it('redacts a big file in bounded memory, giving the thread back as it goes', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    writeFileSync(path.join(ws, 'big.txt'), Buffer.alloc(8 * 1024 * 1024, 'ab'))
    const code = `
      import { monitorEventLoopDelay } from 'node:perf_hooks'
      import { redactorFor } from ${JSON.stringify(new URL('../../src/index.ts', import.meta.url).href)}
      import { collect } from ${JSON.stringify(new URL('../../src/service/collect.ts', import.meta.url).href)}
      const delay = monitorEventLoopDelay({ resolution: 10 })
      delay.enable()
      const kept = await collect(${JSON.stringify(ws)}, ${JSON.stringify(into)}, ['*.txt'], 512 * 1024 * 1024, {
        redactor: redactorFor({ redact: ['a'] }),
      })
      delay.disable()
      process.stdout.write(JSON.stringify({ kept, maxDelayMs: delay.max / 1e6 }))
    `
    const child = spawnSync(
      process.execPath,
      ['--max-old-space-size=48', '--import', 'tsx', '--input-type=module', '-e', code],
      { encoding: 'utf8', timeout: 300_000 },
    )
    assert.equal(child.status, 0, child.stderr.slice(-2000))
    const { kept, maxDelayMs } = JSON.parse(child.stdout) as { kept: string[]; maxDelayMs: number }
    assert.deepEqual(kept, ['big.txt'])
    assert.equal(statSync(path.join(into, 'big.txt')).size, 11 * 4 * 1024 * 1024)
    assert.ok(maxDelayMs < 1000, `the event loop waited ${maxDelayMs} ms at once`)
  })

  it('reads no FIFO, device or sparse giant, and passes over what it cannot read', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    assert.equal(spawnSync('mkfifo', [path.join(ws, 'fifo.txt')]).status, 0)
    writeFileSync(path.join(ws, 'ok.txt'), 'oK')
    // 1 TiB apparent, nothing allocated: read only if it fit the cap, which it does not.
    assert.equal(spawnSync('truncate', ['-s', '1T', path.join(ws, 'sparse.txt')]).status, 0)
    mkdirSync(path.join(ws, 'shut'))
    writeFileSync(path.join(ws, 'shut', 'x.txt'), 'x')
    const started = Date.now()
    const kept = await collect(ws, into, ['**'], 1024 * 1024, { redactor: redactor(['K']) })
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
    assert.deepEqual(kept.sort(), ['ok.txt', 'shut/x.txt'])
    assert.equal(readFileSync(path.join(into, 'ok.txt'), 'utf8'), 'o[REDACTED]')
    assert.equal(existsSync(path.join(into, 'fifo.txt')), false)
  })

  it('counts the bytes read against the cap too: files that redact past it cannot make it read without end', async () => {
    const ws = tempDir('cordon-ws-')
    const into = path.join(tempDir('cordon-files-'), 'run')
    // Each fits the cap as written, none once redacted: reading them all was 100 times the cap of work.
    for (let i = 0; i < 100; i++) writeFileSync(path.join(ws, `f${i}.txt`), 'ab'.repeat(4 * 1024))
    const kept = await collect(ws, into, ['*.txt'], 16 * 1024, { redactor: redactor(['a']) })
    // Two files are read (16 KiB) and neither kept; then nothing more is read.
    assert.deepEqual(kept, [])
    assert.equal(existsSync(into) ? readdirSync(into).length : 0, 0)
  })
})
