// `cordon run --server URL` against a real `cordon serve`: the same output and exit codes as a local run.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { startServe, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

interface Ran {
  status: number | null
  stdout: Buffer
  stderr: string
}

const started: ChildProcess[] = []
after(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

describe('cordon run --server', { timeout: 180_000 }, () => {
  let server: ChildProcess
  let url: string
  let key: string

  before(async () => {
    const served = await startServe(tempDir('cordon-cli-server-'))
    server = served.child
    url = served.url
    assert.ok(served.adminKey, served.stdout())
    // A key granted the network by name: one without a network ceiling gets none.
    const made = await fetch(`${url}/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${served.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'cli',
        scopes: ['runs:write', 'runs:read'],
        ceilings: { network: 'host' },
      }),
    })
    assert.equal(made.status, 201, await made.clone().text())
    key = ((await made.json()) as { key: string }).key
  })
  after(async () => {
    const exited = new Promise((resolve) => server.on('exit', resolve))
    server.kill('SIGTERM')
    await exited
  })

  /** The CLI with `args`, CORDON_API_KEY set unless `env` says otherwise; `onStdout` sees its output. */
  const cordon = (
    args: string[],
    env: Record<string, string | undefined> = {},
    onStdout?: (child: ChildProcess, text: string) => void,
  ) =>
    new Promise<Ran>((resolve) => {
      const child = spawn(process.execPath, [CLI, ...args], {
        env: { ...process.env, CORDON_API_KEY: key, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      started.push(child)
      const out: Buffer[] = []
      let stderr = ''
      child.stdout?.on('data', (b: Buffer) => {
        out.push(b)
        onStdout?.(child, Buffer.concat(out).toString())
      })
      child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
      child.on('close', (status) => resolve({ status, stdout: Buffer.concat(out), stderr }))
    })
  const remote = (args: string[], env?: Record<string, string | undefined>) =>
    cordon(['run', '--server', url, ...args], env)

  it('streams stdout and stderr and exits 0 for ok', async () => {
    const r = await remote(['--', 'sh', '-c', 'echo out; echo err >&2'])
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout.toString(), 'out\n')
    assert.equal(r.stderr, 'err\n')
  })

  it("exits with the program's own code", async () => {
    const r = await remote(['--', 'sh', '-c', 'echo partial; exit 3'])
    assert.equal(r.status, 3, r.stderr)
    assert.equal(r.stdout.toString(), 'partial\n')
  })

  it('passes the bytes through as the server gives them', async () => {
    const r = await remote(['--', 'printf', 'h\\303\\251\\342\\202\\254\\377\\000x'])
    assert.equal(r.status, 0, r.stderr)
    const res = await fetch(`${url}/v1/runs?limit=1`, { headers: { authorization: `Bearer ${key}` } })
    const { runs } = (await res.json()) as { runs: { id: string }[] }
    const kept = await fetch(`${url}/v1/runs/${runs[0]?.id}/output?stream=stdout`, {
      headers: { authorization: `Bearer ${key}` },
    })
    assert.deepEqual([...r.stdout], [...new Uint8Array(await kept.arrayBuffer())])
    // UTF-8 whole; a byte that is not UTF-8 is what the server kept of it (docs/service.md: not yet raw).
    assert.ok(r.stdout.toString('utf8').startsWith('hé€'), r.stdout.toString('utf8'))
  })

  it('a limit: 124 and the one-line summary, as a local run', async () => {
    const r = await remote(['--timeout', '300ms', '--', 'sleep', '10'])
    const local = await cordon(['run', '--timeout', '300ms', '--', 'sleep', '10'])
    assert.equal(r.status, 124, r.stderr)
    assert.equal(r.stderr, local.stderr)
    assert.match(r.stderr, /^cordon: timeout: .*\n$/)
  })

  it('a failed program whose connections the policy refused: the same line on stderr as a local run', async () => {
    const r = await remote([
      '--net',
      'allow:no-such-name.invalid',
      '--',
      'sh',
      '-c',
      'curl -s -o /dev/null -p http://evil.test/; curl -s -o /dev/null -p http://no-such-name.invalid/; exit 7',
    ])
    assert.equal(r.status, 7, r.stderr)
    assert.equal(
      r.stderr,
      'cordon: the network policy refused 1 connection: evil.test:80 (not-allowed); ' +
        'allowed but failed 1 connection: no-such-name.invalid:80 (unresolvable) (network in --json)\n',
    )
  })

  it('command not found: 127', async () => {
    const r = await remote(['--', 'no-such-command-xyz'])
    assert.equal(r.status, 127, r.stderr)
    assert.match(r.stderr, /not-found/)
  })

  it('--json prints the one RunResult', async () => {
    const r = await remote(['--json', '--', 'sh', '-c', 'echo hi; exit 2'])
    assert.equal(r.status, 2, r.stderr)
    const result = JSON.parse(r.stdout.toString())
    assert.equal(result.status, 'nonzero-exit')
    assert.equal(result.stdout, 'hi\n')
  })

  it("a server-only flag: the service's 403, named as the flag, 125", async () => {
    const r = await remote(['--writable', '/tmp', '--', 'true'])
    assert.equal(r.status, 125)
    assert.equal(r.stderr, 'cordon: --writable: options.writable is set by the server only\n')
    const json = await remote(['--json', '--writable', '/tmp', '--', 'true'])
    assert.equal(json.status, 125)
    assert.equal(JSON.parse(json.stdout.toString()).status, 'error')
  })

  it('no key, or a wrong one: 125 with the reason', async () => {
    const none = await remote(['--', 'true'], { CORDON_API_KEY: undefined })
    assert.equal(none.status, 125)
    assert.match(none.stderr, /CORDON_API_KEY/)
    const wrong = await remote(['--', 'true'], { CORDON_API_KEY: 'cordon_wrong' })
    assert.equal(wrong.status, 125)
    assert.match(wrong.stderr, /401 unauthorized: unknown or revoked key/)
  })

  it('Ctrl-C: 130, and the remote run is canceled', async () => {
    let sent = false
    const r = await cordon(
      ['run', '--server', url, '--', 'sh', '-c', 'echo started; sleep 30; echo never'],
      {},
      (child, text) => {
        if (!sent && text.includes('started')) {
          sent = true
          child.kill('SIGINT')
        }
      },
    )
    assert.equal(r.status, 130, r.stderr)
    assert.equal(r.stdout.toString(), 'started\n')
    const res = await fetch(`${url}/v1/runs?limit=1`, { headers: { authorization: `Bearer ${key}` } })
    const { runs } = (await res.json()) as { runs: { state: string; result?: { status: string } }[] }
    assert.equal(runs[0]?.result?.status, 'canceled')
  })
})
