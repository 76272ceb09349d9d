// The cordon ABI: an exec is a handle, its result JSON read in pieces, so nothing has to fit a guessed
// buffer and nothing runs twice; every refusal has its own code.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { EXEC_ERRORS, parseRequest } from '../../src/wasm/imports/cordon.js'
import { loadWasm, runWasm } from '../../src/wasm/index.js'
import { noNamespace } from '../helpers.js'
import { guest } from './guests.js'

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
const resultOf = (logs: { msg: string; source?: unknown }[]) =>
  JSON.parse(logs.find((l) => l.source === 'wasm')!.msg) as Record<string, unknown>

describe('cordon.exec and its handles', { skip: noNamespace }, () => {
  it('runs the command, and its result reads back in pieces as JSON (stdin, env, base64)', async () => {
    const req = json({
      cmd: ['sh', '-c', 'cat; echo " $GREETING"; printf "\\377" >&2'],
      stdin: { base64: Buffer.from('from stdin').toString('base64') },
      env: { GREETING: 'hello' },
      encoding: 'base64',
    })
    const r = await runWasm(guest('cordon', req), {
      invoke: 'exec_show',
      exec: { maxExecs: 1, envAllow: ['GREETING'] },
    })
    assert.equal(r.status, 'ok', r.violation?.message)
    const result = resultOf(r.logs)
    assert.equal(result.status, 'ok')
    assert.equal(result.exitCode, 0)
    assert.equal(Buffer.from(result.stdout as string, 'base64').toString(), 'from stdin hello\n')
    assert.deepEqual([...Buffer.from(result.stderr as string, 'base64')], [0xff])
    assert.equal(r.hostCalls['cordon.result_free'], 1)
  })

  it('answers each refusal with its code: disabled, quota, invalid (logged), too large, bad pointer, 16 held', async () => {
    const echo = await loadWasm(guest('cordon', json({ cmd: ['true'] })))
    assert.equal((await runWasm(echo, { invoke: 'exec_show' })).value, EXEC_ERRORS.disabled)
    const quota = await runWasm(echo, { invoke: 'hold', args: [3], exec: { maxExecs: 2 } })
    assert.equal(quota.value, EXEC_ERRORS.quota)
    assert.equal(quota.execCount, 2)
    const held = await runWasm(echo, { invoke: 'hold', args: [17], exec: { maxExecs: 20 } })
    assert.equal(held.value, EXEC_ERRORS.tooManyHeld)
    assert.equal(held.execCount, 16)
    const invalid = await runWasm(guest('cordon', json({ cmd: ['true'], shell: true })), {
      invoke: 'exec_show',
      exec: { maxExecs: 1 },
    })
    assert.equal(invalid.value, EXEC_ERRORS.invalid)
    assert.match(invalid.logs[0]?.msg ?? '', /unknown field "shell"/)
    assert.equal(
      (await runWasm(echo, { invoke: 'exec', args: [-1, 10], exec: { maxExecs: 1 } })).value,
      EXEC_ERRORS.badPointer,
    )
    const large = await runWasm(echo, { invoke: 'exec', args: [0, 2 * 1024 * 1024], exec: { maxExecs: 1 } })
    assert.equal(large.value, EXEC_ERRORS.tooLarge)
  })

  it('an unknown handle is -1 for result_len, result_read and result_free; counts say execs and room', async () => {
    const mod = await loadWasm(guest('cordon', json({ cmd: ['true'] })))
    assert.equal((await runWasm(mod, { invoke: 'result_len', args: [7] })).value, -1)
    assert.equal((await runWasm(mod, { invoke: 'result_read', args: [7, 0, 10, 0] })).value, -1)
    assert.equal((await runWasm(mod, { invoke: 'result_free', args: [7] })).value, -1)
    assert.equal((await runWasm(mod, { invoke: 'counts', exec: { maxExecs: 5 } })).value, 5)
    assert.equal((await runWasm(mod, { invoke: 'counts' })).value, 0)
    assert.equal((await runWasm(mod, { invoke: 'now', clock: 'fixed:42' })).value, 42n)
  })
})

describe('parseRequest', () => {
  it('takes the documented fields and refuses anything else, by name', () => {
    const ok = parseRequest(
      json({ cmd: ['a', 'b'], stdin: 'x', env: { A: '1' }, cwd: 'sub', encoding: 'utf8' }),
    )
    assert.deepEqual(ok, {
      cmd: ['a', 'b'],
      stdin: new TextEncoder().encode('x'),
      env: [['A', '1']],
      cwd: 'sub',
      encoding: 'utf8',
    })
    assert.match(parseRequest(json({ cmd: [] })) as string, /cmd must be/)
    assert.match(parseRequest(json({ cmd: ['a'], env: { A: 1 } })) as string, /env\.A must be a string/)
    assert.match(parseRequest(json({ cmd: ['a'], stdin: { hex: 'aa' } })) as string, /stdin must be/)
    assert.match(parseRequest(new Uint8Array([0xff])) as string, /not JSON/)
    assert.match(parseRequest(json([1])) as string, /JSON object/)
  })
})
