// Isolation 'sandbox', the host's side: the guest's runtime (a node process running sandbox-runner.ts's
// serveGuest, made as callFunction makes any function's) runs as a cordon sandbox of its own: the tier,
// seccomp, network off, no host path but cordon's dist/ and one socket directory, and a cgroup that bounds
// its memory and CPU for real (a V8 bug exploited by the module is then inside a sandbox too). Its host
// calls come over a unix socket, one frame each, from the one connection that says the nonce.
import { randomUUID } from 'node:crypto'
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Socket } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { callFunction, policySchema, type RunOptions } from '../index.js'
import { encodeFrame, FrameReader } from './frames.js'
import type { HostSession } from './host.js'
import type { WasmPolicy } from './options.js'
import type { GuestSpec, RuntimeEnd, Stopper } from './runtime.js'
import type { SandboxReport } from './sandbox-runner.js'

/** What node and V8 take besides the guest's own memory: the sandbox's cgroup holds both. */
const RUNTIME_MEMORY = 256 * 1024 * 1024
/** CPU node takes to start and compile, besides the guest's own. */
const RUNTIME_CPU_MS = 2000
/** The host stops the guest at its wall time; the sandbox's own limit is a backstop behind it. */
const WALL_SLACK_MS = 5000

/** The runner beside this file in dist/, or in dist/ when running from src/. */
function runnerFile(): string {
  for (const name of ['sandbox-runner.js', '../../dist/wasm/sandbox-runner.js']) {
    const file = fileURLToPath(new URL(name, import.meta.url))
    if (existsSync(file)) return file
  }
  throw new Error('cordon is not built: dist/wasm/sandbox-runner.js is missing (npm run build)')
}

export async function runInSandbox(
  guest: GuestSpec & { bytes: Uint8Array },
  session: HostSession,
  policy: WasmPolicy,
  stopper: Stopper,
): Promise<RuntimeEnd> {
  const runner = runnerFile()
  const exec = policy.exec.options
  // Writable for the sandbox's uid, as cordon requires of a writable path: as root, a pool uid unknown until
  // launch, so by the pool's group (sticky: it cannot replace the socket it did not make).
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cordon-wasm-sock-'))
  if (process.getuid?.() === 0) {
    chownSync(dir, 0, policySchema.shape.uidPool.parse(exec.uidPool).first)
    chmodSync(dir, 0o1770)
  }
  const socketPath = path.join(dir, 's')
  const nonce = randomUUID()
  const abort = new AbortController()
  stopper.stop = (violation) => {
    stopper.stopped ??= violation
    abort.abort()
  }
  let peer: Socket | null = null
  const connections = new Set<Socket>()
  const breach = (message: string) =>
    stopper.stop({ kind: 'error', limit: 'host-call', message: `the guest's runtime ${message}` })
  const server = createServer((socket) => {
    connections.add(socket)
    socket.on('close', () => connections.delete(socket))
    socket.on('error', () => {})
    const reader = new FrameReader()
    socket.on('data', (data: Buffer) => {
      let frames: ReturnType<FrameReader['push']>
      try {
        frames = reader.push(data)
      } catch (error) {
        if (socket === peer) breach(`sent ${(error as Error).message}`)
        return void socket.destroy()
      }
      for (const frame of frames) {
        // The runtime is the connection that opens with the nonce, and the only one: anything else that
        // connects (the socket's directory is the sandbox's to see) is closed, never answered.
        if (socket !== peer) {
          if (peer || frame.kind !== 'hello' || frame.nonce !== nonce) return void socket.destroy()
          peer = socket
        } else if (frame.kind === 'call' && stopper.stopped === null) {
          const { kind: _, ...call } = frame
          void session.handle(call).then((reply) => {
            if (reply && stopper.stopped === null) socket.write(encodeFrame({ kind: 'reply', ...reply }))
          })
        } else if (stopper.stopped === null) return breach('sent a frame out of turn')
      }
    })
  })
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(socketPath, resolve))
  chmodSync(socketPath, 0o666)
  const options: RunOptions = {
    // Where and how the execs run, the guest's runtime does too; nothing else of theirs.
    ...(exec.isolation ? { isolation: exec.isolation } : {}),
    ...(exec.spawner ? { spawner: exec.spawner } : {}),
    ...(exec.uidPool ? { uidPool: exec.uidPool } : {}),
    ...(exec.cgroup ? { cgroup: exec.cgroup } : {}),
    network: 'none',
    writable: [dir],
    limits: {
      wallTimeMs: policy.limits.wallTimeMs + WALL_SLACK_MS,
      cpuTimeMs: policy.limits.cpuTimeMs + RUNTIME_CPU_MS,
      memoryBytes: guest.maxMemoryBytes + RUNTIME_MEMORY,
      maxOutputBytes: 64 * 1024,
    },
    signal: abort.signal,
  }
  const wall = setTimeout(
    () =>
      stopper.stop({
        kind: 'timeout',
        limit: policy.limits.wallTimeMs,
        message: `the guest ran past its wall-time limit of ${policy.limits.wallTimeMs} ms`,
      }),
    policy.limits.wallTimeMs,
  )
  try {
    const { module: _, ...rest } = guest
    const limits = { wallTimeMs: policy.limits.wallTimeMs, cpuTimeMs: policy.limits.cpuTimeMs }
    const result = await callFunction<SandboxReport>(
      runner,
      'serveGuest',
      [{ ...rest, socket: socketPath, nonce, limits }],
      options,
    )
    if (result.status === 'ok' && result.value) {
      const { end, memoryBytes, cpuMs, stopped } = result.value
      // The runner's own word on a stop, of the two kinds it makes (wall and CPU time): the guest's thread
      // is its to measure. Anything else it says is taken as the guest's end, which a trusted host checks.
      if (stopped?.kind === 'timeout' || stopped?.kind === 'cpu-time') stopper.stopped ??= stopped
      return { end, memoryBytes, cpuMs: cpuMs ?? result.cpuMs }
    }
    const cpuMs = result.cpuMs
    // The sandbox ended otherwise: its own limits (the cgroup's memory, CPU time) say how.
    if (result.status === 'memory' || result.status === 'cpu-time' || result.status === 'timeout') {
      const limit =
        result.status === 'memory'
          ? guest.maxMemoryBytes
          : result.status === 'cpu-time'
            ? policy.limits.cpuTimeMs
            : policy.limits.wallTimeMs
      stopper.stopped ??= {
        kind: result.status,
        limit,
        message: `the guest's sandbox: ${result.violation?.message ?? result.status}`,
      }
    }
    const message = result.error?.message ?? result.violation?.message ?? result.status
    return {
      end: {
        kind: 'crashed',
        message: `the guest's sandbox ended ${result.status}: ${message}`,
        memory: false,
      },
      memoryBytes: null,
      cpuMs,
    }
  } finally {
    clearTimeout(wall)
    server.close()
    for (const socket of connections) socket.destroy()
    rmSync(dir, { recursive: true, force: true })
  }
}
