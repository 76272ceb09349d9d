// Ctrl-C during `cordon run --server` at each moment it can come: while cordon reads its own stdin (no run
// is made), before the server has answered the submit, and while it waits for the result (--json). The
// remote run must never be left running.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type Served, startServe, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

interface RunView {
  id: string
  state: string
  result?: { status: string }
}

describe('cordon run --server, canceled', { timeout: 180_000 }, () => {
  let s: Served
  let key: string
  const started: ChildProcess[] = []
  before(async () => {
    s = await startServe(tempDir('cordon-cli-cancel-'))
    key = s.adminKey as string
  })
  after(async () => {
    for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    s.child.kill('SIGTERM')
    await s.exited
  })

  const runs = async (): Promise<RunView[]> => {
    const res = await fetch(`${s.url}/v1/runs?limit=100`, { headers: { authorization: `Bearer ${key}` } })
    return ((await res.json()) as { runs: RunView[] }).runs
  }
  const cordon = (args: string[], stdin: 'ignore' | 'pipe' = 'ignore') => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, CORDON_API_KEY: key },
      stdio: [stdin, 'pipe', 'pipe'],
    })
    started.push(child)
    let stderr = ''
    child.stderr?.setEncoding('utf8').on('data', (t: string) => (stderr += t))
    child.stdout?.resume()
    const exited = new Promise<{ status: number | null; stderr: string; at: number }>((resolve) =>
      child.on('close', (status) => resolve({ status, stderr, at: Date.now() })),
    )
    return { child, exited }
  }

  it('while cordon reads its stdin: 130 at once, and no run is made', { timeout: 30_000 }, async () => {
    const before = (await runs()).length
    const { child, exited } = cordon(['run', '--server', s.url, '--stdin', '-', '--', 'cat'], 'pipe')
    child.stdin?.write('some input, and the writer keeps the pipe open\n')
    await new Promise((r) => setTimeout(r, 1500))
    const sent = Date.now()
    child.kill('SIGINT')
    const r = await exited
    assert.equal(r.status, 130, r.stderr)
    assert.ok(r.at - sent < 5000, `exited ${r.at - sent} ms after Ctrl-C`)
    assert.equal((await runs()).length, before, 'nothing was submitted')
    child.stdin?.destroy()
  })

  it('before the server answered the submit: the run it makes is canceled', { timeout: 60_000 }, async () => {
    // A proxy that holds the server's answers back while `holding`: the submit is made, not answered.
    let holding = true
    const held: (() => void)[] = []
    let posted: () => void = () => {}
    const postSeen = new Promise<void>((resolve) => (posted = resolve))
    const upstream = new URL(s.url)
    const proxy: Server = createServer((client: Socket) => {
      const server = connect(Number(upstream.port), upstream.hostname)
      client.on('data', (b: Buffer) => {
        if (b.toString('latin1').startsWith('POST /v1/runs ')) posted()
        server.write(b)
      })
      server.on('data', (b: Buffer) => (holding ? held.push(() => client.write(b)) : client.write(b)))
      server.on('close', () => (holding ? held.push(() => client.destroy()) : client.destroy()))
      client.on('close', () => server.destroy())
      server.on('error', () => {})
      client.on('error', () => {})
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    const port = (proxy.address() as { port: number }).port
    try {
      const { child, exited } = cordon([
        'run',
        '--server',
        `http://127.0.0.1:${port}`,
        '--',
        'sh',
        '-c',
        'sleep 30',
      ])
      await postSeen
      // The run exists on the server and is running; the CLI has no answer yet.
      let made: RunView | undefined
      for (let i = 0; i < 100 && made?.state !== 'running'; i++) {
        made = (await runs())[0]
        await new Promise((r) => setTimeout(r, 50))
      }
      assert.equal(made?.state, 'running')
      child.kill('SIGINT')
      await new Promise((r) => setTimeout(r, 300))
      holding = false
      for (const release of held.splice(0)) release()
      const r = await exited
      assert.equal(r.status, 130, r.stderr)
      const res = await fetch(`${s.url}/v1/runs/${made?.id}?wait=15s`, {
        headers: { authorization: `Bearer ${key}` },
      })
      const run = (await res.json()) as RunView
      assert.equal(run.state, 'finished')
      assert.equal(run.result?.status, 'canceled')
    } finally {
      proxy.close()
    }
  })

  it('while it waits for the result (--json): 130, and the run is canceled', {
    timeout: 60_000,
  }, async () => {
    const { child, exited } = cordon(['run', '--server', s.url, '--json', '--', 'sh', '-c', 'sleep 30'])
    let run: RunView | undefined
    for (let i = 0; i < 200 && run?.state !== 'running'; i++) {
      await new Promise((r) => setTimeout(r, 50))
      run = (await runs()).find((r) => r.state === 'running')
    }
    assert.ok(run, 'the run started')
    child.kill('SIGINT')
    const r = await exited
    assert.equal(r.status, 130, r.stderr)
    const res = await fetch(`${s.url}/v1/runs/${run.id}?wait=15s`, {
      headers: { authorization: `Bearer ${key}` },
    })
    const done = (await res.json()) as RunView
    assert.equal(done.result?.status, 'canceled')
  })
})
