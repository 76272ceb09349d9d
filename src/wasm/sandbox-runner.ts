// Isolation 'sandbox', inside the sandbox: a called function (callFunction runs it in a node process under
// the guest's limits) that runs the guest in a worker thread exactly as the host would (runInWorker: its
// wall and CPU time enforced here, the sandbox's own limits behind them), and relays each of its host calls
// over a unix socket to the host, which answers them and runs every exec as a sibling sandbox of this one,
// never a child of it. Imports nothing of the engine: the sandbox sees dist/wasm/.
import { once } from 'node:events'
import { connect } from 'node:net'
import type { Violation } from '../index.js'
import type { HostReply } from './abi.js'
import { encodeFrame, FrameReader, replyOf } from './frames.js'
import type { ImportInfo } from './module.js'
import type { GuestEnd } from './result.js'
import { runInWorker, type Stopper } from './runtime.js'

export interface SandboxGuest {
  socket: string
  nonce: string
  /** The module as clamped. */
  bytes: Uint8Array
  imports: ImportInfo[]
  invoke: string
  args: (number | bigint)[]
  memoryExport: string
  maxMemoryBytes: number
  limits: { wallTimeMs: number; cpuTimeMs: number }
}

export interface SandboxReport {
  end: GuestEnd | null
  memoryBytes: number | null
  cpuMs: number | null
  /** The guest stopped here at its wall or CPU time. */
  stopped: Violation | null
}

export async function serveGuest(guest: SandboxGuest): Promise<SandboxReport> {
  const socket = connect(guest.socket)
  await once(socket, 'connect')
  socket.write(encodeFrame({ kind: 'hello', nonce: guest.nonce }))
  const module = await WebAssembly.compile(new Uint8Array(guest.bytes))
  const stopper: Stopper = {
    stopped: null,
    stop(violation) {
      stopper.stopped ??= violation
    },
  }
  let waiting: ((reply: HostReply | null) => void) | null = null
  const reader = new FrameReader()
  socket.on('data', (data: Buffer) => {
    for (const frame of reader.push(data)) {
      if (frame.kind !== 'reply' || !waiting) continue
      const resolve = waiting
      waiting = null
      resolve(replyOf(frame))
    }
  })
  // The host gone (it stopped the guest): so is the guest.
  const gone = () => {
    waiting?.(null)
    stopper.stop({ kind: 'canceled', limit: 'host', message: 'the host closed the connection' })
  }
  socket.on('close', gone)
  socket.on('error', gone)
  const ran = await runInWorker(
    {
      module,
      imports: guest.imports,
      invoke: guest.invoke,
      args: guest.args,
      memoryExport: guest.memoryExport,
      maxMemoryBytes: guest.maxMemoryBytes,
    },
    (call) =>
      new Promise((resolve) => {
        waiting = resolve
        socket.write(encodeFrame({ kind: 'call', ...call }))
      }),
    guest.limits,
    stopper,
  )
  socket.destroy()
  return { ...ran, stopped: stopper.stopped }
}
