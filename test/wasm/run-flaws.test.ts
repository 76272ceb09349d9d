// Each flaw of the seed (platform-v2 PR #33), and the test that shows cordon's face does not have it:
// a retry after -(needed) ran the command again; the exec counter never limited; a request's env passed
// whole; the allowlist matched basenames; allow_network was never enforced; output was read whole before
// it was cut. Every exec here is a real sandbox.
import assert from 'node:assert/strict'
import { copyFileSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import { describe, it } from 'node:test'
import { loadWasm, runWasm } from '../../src/wasm/index.js'
import { noNamespace, processesWith, tempDir, worldWritableDir } from '../helpers.js'
import { guest, request, responses, show } from './guests.js'

describe("the seed's flaws, fixed", { skip: noNamespace }, () => {
  it('a retry after -(needed) gets the kept response: the command ran once (the seed runs it again)', async () => {
    const dir = worldWritableDir()
    const req = request('sh', ['-c', `echo ran >> ${dir}/count; echo hi`])
    const r = await runWasm(guest('platform', req), {
      invoke: 'retry',
      exec: { maxExecs: 10, options: { writable: [dir] } },
    })
    assert.equal(r.status, 'ok', r.violation?.message)
    const [response] = responses(r.logs)
    assert.ok(response && 'ok' in response)
    assert.equal(Buffer.from(response.ok.stdout).toString(), 'hi\n')
    assert.equal(readFileSync(path.join(dir, 'count'), 'utf8'), 'ran\n')
    assert.equal(r.execCount, 1)
    assert.equal(r.hostCalls['platform_sandbox.sandbox_exec'], 2)
  })

  it('maxExecs is enforced: past it, PolicyViolation("exec quota: N execs"), and nothing runs', async () => {
    const r = await runWasm(guest('platform', request('echo', ['x'])), {
      invoke: 'loop',
      args: [5],
      exec: { maxExecs: 3 },
    })
    assert.equal(r.status, 'ok')
    assert.equal(r.execCount, 3)
    assert.equal(r.execs.length, 3)
    const got = responses(r.logs).map((x) =>
      'ok' in x ? 'ok' : `${x.err.kind}: ${(x.err as { message?: string }).message}`,
    )
    assert.deepEqual(got, [
      'ok',
      'ok',
      'ok',
      'PolicyViolation: exec quota: 3 execs',
      'PolicyViolation: exec quota: 3 execs',
    ])
    const stopped = await runWasm(guest('platform', request('echo', ['x'])), {
      invoke: 'loop',
      args: [5],
      exec: { maxExecs: 2, onQuota: 'stop' },
    })
    assert.equal(stopped.status, 'process-limit')
    assert.equal(stopped.violation?.limit, 2)
    assert.equal(stopped.execCount, 2)
  })

  it('a denied command counts against the quota: a guest looping on it meets the limit', async () => {
    const r = await runWasm(guest('platform', request('cat', ['/etc/hostname'])), {
      invoke: 'loop',
      args: [4],
      exec: { maxExecs: 2, options: { allow: ['echo'] } },
    })
    const kinds = responses(r.logs).map((x) => ('err' in x ? x.err.kind : 'ok'))
    assert.deepEqual(kinds, ['CommandNotAllowed', 'CommandNotAllowed', 'PolicyViolation', 'PolicyViolation'])
    assert.deepEqual(
      r.execs.map((e) => e.status),
      ['denied', 'denied'],
    )
  })

  it("a request's env is dropped unless named in envAllow, and the host's own never reaches the command", async () => {
    process.env.CORDON_WASM_HOST_ONLY = 'host-secret'
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's own expansion
    const req = request('sh', ['-c', 'echo ${SECRET_TOKEN-unset} ${CORDON_WASM_HOST_ONLY-unset} $LANG'], {
      env: [
        ['SECRET_TOKEN', 's3cr3t-value'],
        ['LANG', 'C.UTF-8'],
      ],
    })
    const r = await runWasm(guest('platform', req), {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1, envAllow: ['LANG'] },
    })
    delete process.env.CORDON_WASM_HOST_ONLY
    const [response] = responses(r.logs)
    assert.ok(response && 'ok' in response)
    assert.equal(Buffer.from(response.ok.stdout).toString(), 'unset unset C.UTF-8\n')
    const note = r.logs.find((l) => l.source === 'cordon')
    assert.match(note?.msg ?? '', /dropped env SECRET_TOKEN/)
    assert.doesNotMatch(JSON.stringify(r.logs), /s3cr3t-value/)
  })

  it('the allowlist is judged by real path: a copy of sh elsewhere is denied (the seed matches basenames)', async () => {
    const dir = tempDir('cordon-wasm-sh-', { mode: 0o755 })
    const copy = path.join(dir, 'sh')
    copyFileSync('/bin/sh', copy)
    const mod = await loadWasm(guest('platform', request(copy, ['-c', 'echo copy'])))
    const denied = await runWasm(mod, {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1, options: { allow: ['sh'] } },
    })
    assert.deepEqual(responses(denied.logs), [{ err: { kind: 'CommandNotAllowed', message: copy } }])
    assert.equal(denied.execs[0]?.status, 'denied')
    const real = await runWasm(guest('platform', request('sh', ['-c', 'echo real'])), {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1, options: { allow: ['sh'] } },
    })
    const [ok] = responses(real.logs)
    assert.ok(ok && 'ok' in ok)
    assert.equal(Buffer.from(ok.ok.stdout).toString(), 'real\n')
  })

  it('the network is off unless the exec options open it (the seed never enforced allow_network)', async () => {
    const server = createServer((s) => s.end()).listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    const port = (server.address() as { port: number }).port
    const connect = request(process.execPath, [
      '-e',
      `require('net').connect(${port}, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(7))`,
    ])
    try {
      const mod = await loadWasm(guest('platform', connect))
      const exitCode = async (network: 'none' | 'host') => {
        const r = await runWasm(mod, {
          invoke: 'exec_show',
          args: [65536],
          exec: { maxExecs: 1, options: { network, isolation: 'namespace' } },
        })
        const [response] = responses(r.logs)
        assert.ok(response && 'ok' in response, show(response))
        return response.ok.exitCode
      }
      assert.equal(await exitCode('none'), 7)
      assert.equal(await exitCode('host'), 0)
    } finally {
      server.close()
    }
  })

  it('output is capped as it is read (the program stopped at the cap), or answered OutputTooLarge', async () => {
    const mod = await loadWasm(guest('platform', request('yes')))
    const options = { maxExecs: 1, options: { limits: { maxOutputBytes: '4K' } } }
    const cut = await runWasm(mod, { invoke: 'exec_show', args: [65536], exec: options })
    const [response] = responses(cut.logs)
    assert.ok(response && 'ok' in response)
    assert.equal(response.ok.stdout.length, 4096)
    assert.equal(response.ok.exitCode, -1)
    assert.equal(cut.execs[0]?.status, 'output-limit')
    const refused = await runWasm(mod, {
      invoke: 'exec_show',
      args: [65536],
      exec: { ...options, outputOverflow: 'error' },
    })
    assert.deepEqual(responses(refused.logs), [{ err: { kind: 'OutputTooLarge', value: 4096n } }])
  })

  it('a command past its wall time is Timeout(ms), and nothing of it is left', async () => {
    const mark = `${91 + Math.random()}`.slice(0, 8)
    const started = Date.now()
    const r = await runWasm(guest('platform', request('sleep', [mark])), {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1, options: { limits: { wallTimeMs: '1s' } } },
    })
    assert.deepEqual(responses(r.logs), [{ err: { kind: 'Timeout', value: 1000n } }])
    assert.ok(Date.now() - started < 10_000)
    assert.deepEqual(processesWith(`sleep ${mark}`), [])
  })

  it("a working_directory must lie inside the execs' own directory", async () => {
    const outside = await runWasm(guest('platform', request('pwd', [], { workingDirectory: '/etc' })), {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1 },
    })
    const [response] = responses(outside.logs)
    assert.ok(response && 'err' in response && response.err.kind === 'ExecutionFailed')
    assert.match((response.err as { message: string }).message, /working_directory/)
    const dir = worldWritableDir()
    const up = await runWasm(guest('platform', request('pwd', [], { workingDirectory: '..' })), {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1, options: { cwd: dir } },
    })
    assert.ok(responses(up.logs)[0] && 'err' in responses(up.logs)[0]!)
    const sub = await runWasm(guest('platform', request('pwd', [], { workingDirectory: '.' })), {
      invoke: 'exec_show',
      args: [4096],
      exec: { maxExecs: 1, options: { cwd: dir } },
    })
    const [here] = responses(sub.logs)
    assert.ok(here && 'ok' in here, show(here))
    assert.equal(Buffer.from(here.ok.stdout).toString().trim(), dir)
  })
})
