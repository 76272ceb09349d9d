// `cordon wasm`: the built CLI running guests, its flags from the WASM face's schema, the run flags for
// the execs, the guest's output live and `cordon run`'s exit codes.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { decodeResult } from '../../src/wasm/bincode.js'
import { noNamespace, tempDir } from '../helpers.js'
import { guest, request } from '../wasm/guests.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const dir = tempDir('cordon-wasm-cli-', { mode: 0o755 })
const file = (name: string, bytes: Uint8Array) => {
  const at = path.join(dir, name)
  writeFileSync(at, bytes)
  return at
}
const hello = file('hello.wasm', guest('wasi-hello'))
const echo = file('echo.wasm', guest('platform', request('echo', ['from', 'exec'])))
const cordon = (...args: string[]) =>
  spawnSync(process.execPath, [CLI, 'wasm', ...args], { encoding: 'utf8', timeout: 120_000 })

describe('cordon wasm', () => {
  it("runs a WASI command: its args after --, its output live, its exit code as cordon's", () => {
    const r = cordon(hello, '--', 'first\n')
    assert.equal(r.status, 3, r.stderr)
    assert.equal(r.stdout, 'first\nhello\n')
    assert.equal(r.stderr, 'to stderr\n')
  })

  it("--json prints one WasmResult; --clock is the guest's", () => {
    const r = cordon(echo, '--invoke', 'clock', '--arg', '2', '--clock', 'fixed:7,step:1', '--json')
    assert.equal(r.status, 0, r.stderr)
    const result = JSON.parse(r.stdout)
    assert.equal(result.status, 'ok')
    assert.deepEqual(result.clock, { mode: 'virtual', nowMs: 9 })
    assert.deepEqual(
      result.logs.map((l: { msg: string }) => Buffer.from(l.msg, 'hex').readBigInt64LE()),
      [7n, 8n],
    )
  })

  it('execs run under the run flags, only with --max-execs; the value is printed', {
    skip: noNamespace,
  }, () => {
    const off = cordon(echo, '--invoke', 'exec_show', '--arg', '4096', '--json')
    assert.equal(JSON.parse(off.stdout).execCount, 0)
    const r = cordon(
      echo,
      '--invoke',
      'exec_show',
      '--arg',
      '4096',
      '--max-execs',
      '1',
      '--allow',
      'echo',
      '--timeout',
      '5s',
    )
    assert.equal(r.status, 0, r.stderr)
    const hex = /\[wasm info\] ([0-9a-f]+)/.exec(r.stderr)?.[1]
    assert.ok(hex, r.stderr)
    const response = decodeResult(Buffer.from(hex, 'hex'))
    assert.ok('ok' in response)
    assert.equal(Buffer.from(response.ok.stdout).toString(), 'from exec\n')
    assert.equal(r.stdout, `${hex.length / 2}\n`)
    const denied = cordon(
      echo,
      '--invoke',
      'exec_show',
      '--arg',
      '4096',
      '--max-execs',
      '1',
      '--allow',
      'cat',
      '--json',
    )
    assert.equal(JSON.parse(denied.stdout).execs[0].status, 'denied')
  })

  it("a bad flag exits 125 naming the flag, the wasm face's or the run's", () => {
    for (const [args, flag] of [
      [['--wasm-memory', '1K'], '--wasm-memory'],
      [['--timeout', '2'], '--timeout'],
      [['--clock', 'sometimes'], '--clock'],
      [['--invoke', 'nope'], '--invoke'],
    ] as const) {
      const r = cordon(echo, ...args)
      assert.equal(r.status, 125, `${args}: ${r.stderr}`)
      assert.match(r.stderr, new RegExp(`^cordon: ${flag}: `), r.stderr)
    }
    const limit = cordon(file('spin.wasm', guest('spin')), '--invoke', 'run', '--wasm-timeout', '500ms')
    assert.equal(limit.status, 124)
    assert.match(limit.stderr, /cordon: timeout: /)
  })

  it("help lists its flags: the wasm face's and the run's, but the run's --clock", () => {
    const r = spawnSync(process.execPath, [CLI, 'wasm', '--help'], { encoding: 'utf8' })
    assert.equal(r.status, 0)
    for (const flag of [
      '--max-execs',
      '--wasm-timeout',
      '--clock <real|fixed:T|step:MS>',
      '--allow',
      '--timeout',
    ])
      assert.ok(r.stdout.includes(flag), flag)
    assert.equal(r.stdout.match(/^ {2}--clock /gm)?.length, 1)
  })
})
