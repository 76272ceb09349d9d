import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import {
  createSandbox,
  doctor,
  openSpawner,
  PolicyError,
  QuotaError,
  type SandboxRunOptions,
  SpawnerError,
} from '../../src/index.js'
import { noSpawner, tempDir } from '../helpers.js'

describe('createSandbox', () => {
  it('runs under its policy, merging per-call options, and keeps stats', async () => {
    const box = createSandbox({ limits: { wallTimeMs: 300 }, env: { A: '1' } })
    const ok = await box.run(['sh', '-c', 'echo $A$B'], { env: { B: '2' } })
    assert.equal(ok.stdout, '12\n')
    const slow = await box.run(['sleep', '5'])
    assert.equal(slow.status, 'timeout')
    await box.run(['sh', '-c', 'exit 3'])
    const stats = box.stats()
    assert.equal(stats.runs, 3)
    assert.deepEqual(stats.violations, { timeout: 1 })
    assert.ok(stats.wallMs >= 300, `wallMs ${stats.wallMs}`)
    assert.ok(stats.cpuMs >= 0, `cpuMs ${stats.cpuMs}`)
  })

  it('a quota refuses further runs with a clear error, also for concurrent calls', async () => {
    const box = createSandbox({ maxRuns: 2 })
    const results = await Promise.allSettled([box.run(['true']), box.run(['true']), box.run(['true'])])
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'fulfilled', 'rejected'],
    )
    const refused = results[2] as PromiseRejectedResult
    assert.ok(refused.reason instanceof QuotaError, String(refused.reason))
    assert.match(refused.reason.message, /maxRuns/)
    await assert.rejects(box.run(['true']), QuotaError)
    assert.equal(box.stats().runs, 2)
  })

  it('a call that starts nothing (invalid input, a closed spawner) uses none of the quota', async () => {
    const dir = tempDir('cordon-box-', { parent: '/var/tmp', mode: 0o755 })
    const mod = path.join(dir, 'm.mjs')
    writeFileSync(mod, 'export const f = () => 1\n')
    const spawner = noSpawner ? null : await openSpawner()
    await spawner?.close()
    const box = createSandbox({ maxRuns: 1 })
    const bad = { limits: { memoryBytes: 'lots' } } as unknown as SandboxRunOptions
    await assert.rejects(box.run(['true'], bad), PolicyError)
    assert.throws(() => box.start(['true'], bad), PolicyError)
    assert.throws(() => box.start(['true'], { encoding: 'buffer' } as SandboxRunOptions), PolicyError)
    await assert.rejects(box.callFunction(path.join(dir, 'missing.mjs'), 'f'), PolicyError)
    await assert.rejects(box.callFunction(mod, 'f', [() => 1]), PolicyError)
    await assert.rejects(box.callFunction(mod, 'f', [], bad), PolicyError)
    if (spawner) await assert.rejects(box.run(['true'], { spawner }), SpawnerError)
    assert.equal((await box.run(['true'])).status, 'ok', 'the one run the quota allows')
    await assert.rejects(box.run(['true']), QuotaError)
    assert.equal(box.stats().runs, 1)
  })

  it('an invalid maxRuns is invalid input: a PolicyError naming the field', () => {
    for (const maxRuns of [-1, 1.5, Number.NaN]) {
      assert.throws(
        () => createSandbox({ maxRuns }),
        (error) =>
          error instanceof PolicyError && error.field === 'maxRuns' && /whole number/.test(error.reason),
        String(maxRuns),
      )
    }
  })

  it('sandboxes coexist without shared state; callFunction counts too', async () => {
    const dir = tempDir('cordon-box-', { parent: '/var/tmp', mode: 0o755 })
    const mod = path.join(dir, 'm.mjs')
    writeFileSync(mod, 'export const twice = (x) => x * 2\n')
    const a = createSandbox()
    const b = createSandbox({ limits: { maxOutputBytes: 4 } })
    const [ra, rb, rc] = await Promise.all([
      a.run(['echo', 'hello']),
      b.run(['echo', 'hello']),
      a.callFunction(mod, 'twice', [21]),
    ])
    assert.equal(ra.status, 'ok')
    assert.equal(rb.status, 'output-limit')
    assert.equal(rc.value, 42)
    assert.equal(a.stats().runs, 2)
    assert.deepEqual(b.stats().violations, { 'output-limit': 1 })
  })

  it("encoding 'buffer' is the sandbox's: every run gives Buffers, and a run cannot ask for another", async () => {
    const sandbox = createSandbox({ encoding: 'buffer' })
    const bytes = Buffer.from([0xff, 0x00, 0xfe])
    const r = await sandbox.run(['cat'], { stdin: bytes })
    r.stdout satisfies Buffer
    assert.deepEqual(r.stdout, bytes)
    const chunks: Buffer[] = []
    for await (const chunk of sandbox.start(['cat'], { stdin: bytes }).output) chunks.push(chunk.data)
    assert.deepEqual(Buffer.concat(chunks), bytes)
    // @ts-expect-error: not a per-run option
    await assert.rejects(async () => sandbox.run(['true'], { encoding: 'utf8' }), /encoding/)
    const text = await createSandbox().run(['printf', 'hi'])
    text.stdout satisfies string
    assert.equal(text.stdout, 'hi')
  })

  it('doctor() returns what cordon doctor prints', () => {
    const caps = doctor()
    assert.ok(caps.autoTier === 'namespace' || caps.autoTier === 'process', String(caps.autoTier))
    assert.ok(
      caps.checks.some((c) => c.name === 'cgroups'),
      'has a cgroups check',
    )
    assert.equal(typeof caps.capabilities.isRoot, 'boolean')
  })
})
