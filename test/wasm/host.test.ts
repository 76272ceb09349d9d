// The host's side of a guest, fed directly: whatever the guest's side sends, the host answers only the
// module's own imports, with integers and bounded bytes, one call at a time; a breach stops the guest.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { describe, it } from 'node:test'
import type { Violation } from '../../src/index.js'
import { HostSession } from '../../src/wasm/host.js'
import type { ImportInfo } from '../../src/wasm/module.js'
import { parseWasmOptions, type WasmOptions } from '../../src/wasm/options.js'
import { noNamespace } from '../helpers.js'

const imports: ImportInfo[] = [
  { module: 'platform_sandbox', name: 'get_timestamp', kind: 'function' },
  { module: 'platform_sandbox', name: 'log_message', kind: 'function' },
  { module: 'wasi_snapshot_preview1', name: 'fd_write', kind: 'function' },
  { module: 'cordon', name: 'exec', kind: 'function' },
]

function session(options: WasmOptions = {}) {
  const stops: Violation[] = []
  const s = new HostSession(parseWasmOptions(options), imports, (v) => stops.push(v))
  return { s, stops }
}

describe('HostSession', () => {
  it("answers the module's imports; anything else is a breach that stops the guest", async () => {
    for (const bad of [
      null,
      'platform_sandbox.get_timestamp',
      { name: 'cordon.result_len', values: [1] },
      { name: 'platform_sandbox.get_timestamp', values: [1.5] },
      { name: 'platform_sandbox.get_timestamp', values: Array(9).fill(0) },
      { name: 'platform_sandbox.log_message', values: [2, 3], bytes: 'abc' },
      { name: 'platform_sandbox.log_message', values: [2, 3], bytes: new Uint8Array(2 * 1024 * 1024) },
      { name: 'x'.repeat(1000), values: [] },
    ]) {
      const { s, stops } = session()
      assert.equal(await s.handle(bad), null)
      assert.equal(stops[0]?.limit, 'host-call', JSON.stringify(bad))
      assert.equal(s.hostCalls.size, 0)
    }
    const { s } = session({ clock: 'fixed:9' })
    assert.deepEqual(await s.handle({ name: 'platform_sandbox.get_timestamp', values: [] }), { values: [9n] })
  })

  it("a second call while one is in flight is a breach (the guest's side blocks on each)", {
    skip: noNamespace,
  }, async () => {
    const { s, stops } = session({ exec: { maxExecs: 1 } })
    const req = new TextEncoder().encode(JSON.stringify({ cmd: ['sleep', '0.3'] }))
    const slow = s.handle({ name: 'cordon.exec', values: [0, req.length], bytes: req })
    assert.equal(await s.handle({ name: 'platform_sandbox.get_timestamp', values: [] }), null)
    assert.equal(stops[0]?.limit, 'host-call')
    assert.match(stops[0]!.message, /while another was in flight/)
    assert.ok(await slow)
    await s.close()
  })

  it('keeps logs and output within their caps; the output cap stops the guest as output-limit', async () => {
    const { s, stops } = session({ limits: { maxLogBytes: 10, maxOutputBytes: 4 } })
    s.log(2, new TextEncoder().encode('12345678'), 8)
    s.log(2, new TextEncoder().encode('more'), 4)
    assert.deepEqual(s.logs, [{ level: 'info', msg: '12345678', source: 'wasm' }])
    assert.equal(s.logsTruncated, true)
    s.write(1, new TextEncoder().encode('ab'))
    s.write(2, new TextEncoder().encode('cdef'))
    assert.deepEqual(s.output(), { stdout: 'ab', stderr: 'cd' })
    assert.equal(stops[0]?.kind, 'output-limit')
  })

  it('stops the guest past maxHostCalls', async () => {
    const { s, stops } = session({ limits: { maxHostCalls: 2 } })
    const call = { name: 'platform_sandbox.get_timestamp', values: [] }
    assert.ok(await s.handle(call))
    assert.ok(await s.handle(call))
    assert.equal(await s.handle(call), null)
    assert.equal(stops[0]?.limit, 'maxHostCalls')
  })

  it("makes the execs' workspace at the first exec and removes it at close", {
    skip: noNamespace,
  }, async () => {
    const { s } = session({ exec: { maxExecs: 1 } })
    const out = await s.exec({
      argv: ['sh', '-c', 'pwd; touch made'],
      env: [],
      stdin: null,
      workingDirectory: null,
    })
    assert.equal(out.kind, 'ran')
    const dir = out.kind === 'ran' ? out.result.stdout.toString().trim() : ''
    assert.ok(existsSync(`${dir}/made`), dir)
    await s.close()
    assert.equal(existsSync(dir), false)
  })
})
