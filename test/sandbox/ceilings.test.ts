// A sandbox's options are ceilings: a run of it may tighten them, never loosen them. Each refusal names
// the field and both values; real runs show the tightening and the additions hold.
import assert from 'node:assert/strict'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { createSandbox, PolicyError } from '../../src/index.js'
import { noNamespace, tempDir, worldWritableDir } from '../helpers.js'

/** Rejects with a PolicyError on `field` whose message holds each of `values`. */
async function refused(promise: Promise<unknown>, field: string, ...values: string[]) {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(e instanceof PolicyError, String(e))
    assert.equal(e.field, field)
    for (const v of values) assert.ok(e.message.includes(v), `${e.message} names ${v}`)
    return true
  })
}

describe('createSandbox: its options are ceilings', () => {
  it('refuses a run asking more of any limit, naming it and both values', async () => {
    const box = createSandbox({
      limits: { wallTimeMs: '2s', memoryBytes: '128M', maxOutputBytes: '64K', maxProcesses: 8 },
    })
    await refused(box.run(['true'], { limits: { wallTimeMs: '1h' } }), 'limits.wallTimeMs', '3600s', '2s')
    await refused(box.run(['true'], { limits: { memoryBytes: '1G' } }), 'limits.memoryBytes', '1G', '128M')
    await refused(
      box.run(['true'], { limits: { maxOutputBytes: 1 << 20 } }),
      'limits.maxOutputBytes',
      '1M',
      '64K',
    )
    await refused(box.run(['true'], { limits: { maxProcesses: 9 } }), 'limits.maxProcesses', '9', '8')
    // A limit the sandbox left unset is the library's default: a ceiling too.
    await refused(box.run(['true'], { limits: { cpuTimeMs: '10m' } }), 'limits.cpuTimeMs', '600s', '30s')
    // Refused before it ran: nothing counted.
    assert.equal(box.stats().runs, 0)
  })

  it('refuses a wider network, another host, an address range the sandbox does not reach', async () => {
    const none = createSandbox({ network: 'none' })
    await refused(none.run(['true'], { network: 'host' }), 'network', '"host"', '"none"')
    await refused(none.run(['true'], { network: 'allow:example.com' }), 'network', 'example.com', '"none"')
    const some = createSandbox({
      network: { allow: ['*.example.com', 'pypi.org:443'], deny: ['bad.example.com'] },
    })
    await refused(some.run(['true'], { network: 'host' }), 'network', '"host"')
    await refused(
      some.run(['true'], { network: { allow: ['a.example.com', 'evil.com'] } }),
      'network.allow.1',
      '"evil.com"',
      '*.example.com',
    )
    await refused(some.run(['true'], { network: 'allow:pypi.org' }), 'network.allow.0', '"pypi.org"')
    await refused(
      some.run(['true'], { network: 'allow:a.example.com,+loopback' }),
      'network.allowLoopback',
      'true',
      'false',
    )
  })

  it('refuses writable paths, passed variables, tiers and root filesystems the sandbox does not give', async () => {
    const dir = tempDir('cordon-ceil-')
    const box = createSandbox({ writable: [dir], passEnv: ['HOME'], isolation: 'namespace' })
    await refused(box.run(['true'], { writable: ['/etc'] }), 'writable.0', '"/etc"', dir)
    await refused(box.run(['true'], { writable: [path.join(dir, '..')] }), 'writable.0')
    await refused(box.run(['true'], { passEnv: ['HOME', 'PATH'] }), 'passEnv.1', '"PATH"')
    await refused(box.run(['true'], { isolation: 'process' }), 'isolation', '"process"', '"namespace"')
    await refused(box.run(['true'], { rootfs: '/' }), 'rootfs', '"/"')
    const auto = createSandbox({})
    await refused(auto.run(['true'], { isolation: 'process' }), 'isolation', '"process"', '"auto"')
    await refused(auto.run(['true'], { cgroup: { mode: 'off' } }), 'cgroup.mode', '"off"')
    const strict = createSandbox({ readable: [dir] })
    await refused(strict.run(['true'], { readable: ['/home'] }), 'readable.0', '"/home"')
    const cmds = createSandbox({ allow: ['echo'] })
    await refused(cmds.run(['true'], { allow: ['echo', 'sh'] }), 'allow.1', '"sh"')
  })

  it('runs what tightens it, and keeps what a run can only add to', { skip: noNamespace }, async () => {
    const dir = worldWritableDir('cordon-ceil-')
    const box = createSandbox({
      limits: { wallTimeMs: '20s' },
      writable: [dir],
      deny: ['cat'],
      redact: ['s3cret'],
    })
    const quick = await box.run(['sleep', '5'], { limits: { wallTimeMs: '300ms' } })
    assert.equal(quick.status, 'timeout')
    const sub = path.join(dir, 'sub')
    const made = await box.run(['sh', '-c', `mkdir -p ${sub}; echo ok > ${sub}/f; echo s3cret token`], {
      redact: ['token'],
      deny: ['ls'],
    })
    assert.equal(made.status, 'ok', made.stderr)
    // The run's redaction is added to the sandbox's, not put in its place.
    assert.equal(made.stdout, '[REDACTED] [REDACTED]\n')
    // So is its deny list: the sandbox's `cat` stays denied.
    const denied = await box.run(['cat', '/dev/null'], { deny: ['ls'] })
    assert.equal(denied.status, 'denied')
    // A run's hide list is added to the sandbox's (here its default: cordon's home), not put in its place.
    // (Hidden, it is an empty directory the run can list; shown, a listing or a refusal.)
    const home = await box.run(['sh', '-c', `ls -A ${os.homedir()}; echo "rc=$?"`], { hide: ['/var/tmp'] })
    assert.equal(home.stdout, 'rc=0\n', `the home shows empty: ${home.stdout}${home.stderr}`)
    // A writable path inside the sandbox's is a tightening.
    const inner = await box.run(['sh', '-c', `echo again > ${sub}/f`], { writable: [sub] })
    assert.equal(inner.status, 'ok', inner.stderr)
  })
})
