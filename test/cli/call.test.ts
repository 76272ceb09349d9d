// What `cordon call` prints without --json: the value whole, strings raw, anything else as JSON.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { toJson } from '../../src/cli/call.js'
import { noLauncher, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
// Outside /tmp (private in the sandbox), readable by a sandbox uid.
const dir = tempDir('cordon-call-cli-', { mode: 0o755, parent: '/var/tmp' })
const mod = path.join(dir, 'values.mjs')
writeFileSync(
  mod,
  `export const long = () => 'x'.repeat(20000) + ' "quoted" \\'single\\'\\nsecond line'
export const many = () => Array.from({ length: 250 }, (_, i) => i)
export const nested = () => ({ a: { b: { c: { d: { e: 'deep' } } } }, big: 2n ** 64n, map: new Map([['k', 1]]) })
export const nothing = () => {}
export const empty = () => ''
`,
)
const call = (name: string) =>
  spawnSync(process.execPath, [CLI, 'call', `${mod}#${name}`, '--isolation', 'process'], {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  })

describe('cordon call prints the value whole', { skip: noLauncher }, () => {
  it('a string raw, uncut and unquoted, then a newline (like jq -r)', () => {
    const r = call('long')
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, `${'x'.repeat(20000)} "quoted" 'single'\nsecond line\n`)
  })

  it('anything else as one line of JSON, arrays and depth uncut', () => {
    assert.deepEqual(
      JSON.parse(call('many').stdout),
      Array.from({ length: 250 }, (_, i) => i),
    )
    const nested = call('nested')
    assert.equal(nested.stdout.split('\n').length, 2, nested.stdout)
    assert.deepEqual(JSON.parse(nested.stdout), {
      a: { b: { c: { d: { e: 'deep' } } } },
      big: '18446744073709551616n',
      map: { $map: [['k', 1]] },
    })
  })

  it('nothing for undefined; an empty line for an empty string', () => {
    assert.equal(call('nothing').stdout, '')
    assert.equal(call('empty').stdout, '\n')
  })
})

describe('toJson', () => {
  it('marks only a reference back into its own ancestors, through Maps and Sets too', () => {
    const row = { id: 1 }
    const self: Record<string, unknown> = { a: row, b: [row, row] }
    self.me = self
    assert.equal(toJson(self), '{"a":{"id":1},"b":[{"id":1},{"id":1}],"me":"[Circular]"}')
    const m = new Map<string, unknown>([['k', 1]])
    m.set('self', m)
    m.set('set', new Set([m]))
    assert.equal(toJson(m), '{"$map":[["k",1],["self","[Circular]"],["set",{"$set":["[Circular]"]}]]}')
    assert.equal(toJson([1n, new Uint8Array([2])]), '["1n",[2]]')
    assert.equal(toJson(undefined), undefined)
  })
})
