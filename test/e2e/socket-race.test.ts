// The namespace tier covers each host unix socket the sandbox would see with /dev/null (bwrap.ts). On a busy
// host sockets come and go: one listed, and checked, before the run may be gone by the time bwrap mounts
// over it, and bwrap then fails ("Can't create file at …: Read-only file system"). A run must not fail
// for that: here a socket is bound and removed in a loop while runs start.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync, rmSync, unlinkSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { type OutputChunk, run, start } from '../../src/index.js'
import { noNamespace, tempDir } from '../helpers.js'

const RUNS = 20

/** Bind a listening socket at argv[1], then remove it, each state held up to 3 ms, for ever. */
const FLAPPER = `
import os, random, socket, sys, time
p = sys.argv[1]
print('ready', flush=True)
while True:
    s = socket.socket(socket.AF_UNIX)
    s.bind(p)
    s.listen(1)
    time.sleep(random.random() * 0.003)
    s.close()
    os.unlink(p)
    time.sleep(random.random() * 0.003)
`

const children: ChildProcess[] = []
after(() => {
  for (const c of children) c.kill('SIGKILL')
})

describe('a host socket that comes and goes while runs start', { skip: noNamespace }, () => {
  it('no run fails for it, and none shows bwrap its words', async () => {
    const dir = tempDir('cordon-sockrace-', { parent: '/var/tmp', mode: 0o755 })
    const sock = path.join(dir, 'daemon.sock')
    const flapper = spawn('python3', ['-c', FLAPPER, sock], { stdio: ['ignore', 'pipe', 'inherit'] })
    children.push(flapper)
    await new Promise<void>((resolve, reject) => {
      flapper.stdout!.once('data', () => resolve())
      flapper.once('exit', (code) => reject(new Error(`the flapper exited (${code})`)))
    })
    const failed: string[] = []
    for (let i = 0; i < RUNS; i += 2) {
      const pair = await Promise.all(
        [0, 1].map(async () => {
          const live: OutputChunk[] = []
          const r = await run(['sh', '-c', `echo ran; ls ${dir} >/dev/null`], {
            isolation: 'namespace',
            onOutput: (c) => live.push(c),
          })
          return { r, live }
        }),
      )
      for (const { r, live } of pair) {
        const shown = live.map((c) => c.data).join('')
        if (r.status !== 'ok' || r.stdout !== 'ran\n' || /bwrap/.test(shown)) {
          failed.push(`${r.status} ${r.violation?.message ?? ''} ${JSON.stringify(shown)}`)
        }
      }
    }
    // start(): what the caller wrote before a failed attempt reaches the one that ran.
    for (let i = 0; i < RUNS / 2; i++) {
      const h = start(['cat'], { isolation: 'namespace' })
      h.write('one ')
      h.write('two')
      h.closeStdin()
      const chunks: string[] = []
      for await (const c of h.output) chunks.push(c.data)
      const r = await h.result
      if (r.status !== 'ok' || r.stdout !== 'one two' || chunks.join('') !== 'one two') {
        failed.push(`start: ${r.status} ${r.violation?.message ?? ''} ${JSON.stringify(chunks)}`)
      }
    }
    flapper.kill('SIGKILL')
    assert.deepEqual(failed, [])
  })

  // Deterministic: start() plans and spawns bwrap synchronously, so the socket (listed, and still there
  // when planned) is removed while bwrap is still starting, long before it mounts over it.
  for (const what of ['the socket', 'its directory'] as const) {
    it(`a run whose covered socket goes right after it started still runs (${what} removed)`, async () => {
      const dir = tempDir('cordon-sockrace-', { parent: '/var/tmp', mode: 0o755 })
      const sock = path.join(dir, 'daemon.sock')
      const server = net.createServer(() => {})
      await new Promise<void>((resolve) => server.listen(sock, resolve))
      // Past the listing's reuse (SOCKETS_TTL_MS): the socket is listed, so the run covers it.
      await sleep(1100)
      try {
        const live: OutputChunk[] = []
        const h = start(['sh', '-c', 'echo ran'], { isolation: 'namespace', onOutput: (c) => live.push(c) })
        if (what === 'the socket') unlinkSync(sock)
        else rmSync(dir, { recursive: true })
        const r = await h.result
        assert.equal(r.status, 'ok', `${r.status}: ${r.violation?.message ?? ''} ${r.stderr}`)
        assert.equal(r.stdout, 'ran\n')
        assert.equal(r.stderr, '')
        assert.deepEqual(
          live.map((c) => c.data),
          ['ran\n'],
        )
      } finally {
        await new Promise((resolve) => server.close(resolve))
      }
    })
  }

  it("a program that prints bwrap's words about a covered socket runs once, its output whole", async () => {
    const dir = tempDir('cordon-sockrace-', { parent: '/var/tmp', mode: 0o777 })
    const sock = path.join(tempDir('cordon-sockrace-', { parent: '/var/tmp', mode: 0o755 }), 'daemon.sock')
    const server = net.createServer(() => {})
    await new Promise<void>((resolve) => server.listen(sock, resolve))
    try {
      const words = `bwrap: Can't create file at ${sock}: Read-only file system`
      const r = await run(['sh', '-c', `echo x >> ${dir}/count; echo "${words}" >&2; exit 1`], {
        isolation: 'namespace',
        writable: [dir],
        cwd: '/',
      })
      assert.equal(r.status, 'nonzero-exit')
      assert.equal(r.stderr, `${words}\n`)
      assert.equal(readFileSync(path.join(dir, 'count'), 'utf8'), 'x\n')
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
