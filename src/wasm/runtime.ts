// Isolation 'worker': the guest in a worker thread of this process, its calls served by the session. The
// worker is what makes the guest stoppable: terminate() ends it in 2-7 ms even mid-loop or mid-wait. Its
// wall time is a timer here, its CPU time its own thread's (read from /proc every 50 ms), its memory the
// module's maximum as clamped (the worker's resourceLimits bound only its JS heap, never wasm memory).
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { MessageChannel, receiveMessageOnPort, Worker } from 'node:worker_threads'
import type { Violation } from '../index.js'
import type { HostCall, HostReply } from './abi.js'
import { answer, newControl, type WorkerMessage } from './bridge.js'
import type { ImportInfo } from './module.js'
import type { GuestEnd } from './result.js'
import type { WorkerInit } from './worker.js'

export interface GuestSpec {
  module: WebAssembly.Module
  imports: ImportInfo[]
  invoke: string
  args: (number | bigint)[]
  memoryExport: string
  maxMemoryBytes: number
}

/** How the guest's runtime ended: its own word on the guest, and what was measured. */
export interface RuntimeEnd {
  end: GuestEnd | null
  memoryBytes: number | null
  cpuMs: number | null
}

/** Stops a guest: set by the runtime once it runs, called by the session or a timer. */
export interface Stopper {
  stopped: Violation | null
  stop(violation: Violation): void
}

/** USER_HZ: the unit of /proc's CPU times, 100 on every Linux architecture cordon runs on. */
const TICKS_PER_SECOND = 100
const CPU_POLL_MS = 50

/** The worker's entry: beside this file in dist/, or in dist/ when running from src/ (tests, tsx: a worker
 * does not inherit tsx's loader on Node 20). */
export function workerUrl(): URL {
  for (const name of ['worker.js', '../../dist/wasm/worker.js']) {
    const url = new URL(name, import.meta.url)
    if (existsSync(fileURLToPath(url))) return url
  }
  throw new Error('cordon is not built: dist/wasm/worker.js is missing (npm run build)')
}

/** CPU time of one thread of this process, in ms; null once it is gone. */
function threadCpuMs(tid: number): number | null {
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND
  } catch {
    return null
  }
}

/** Answers one host call (the session, or the socket to it from a sandbox); null: no answer, stopping. */
export type CallHandler = (call: HostCall) => Promise<HostReply | null>

export function runInWorker(
  guest: GuestSpec,
  handle: CallHandler,
  limits: { wallTimeMs: number; cpuTimeMs: number },
  stopper: Stopper,
): Promise<RuntimeEnd> {
  const control = newControl()
  const { port1, port2 } = new MessageChannel()
  const init: WorkerInit = { ...guest, control, port: port2 }
  const worker = new Worker(workerUrl(), {
    workerData: init,
    transferList: [port2],
    // The guest's JS is only the glue: a small heap. No copy of the host's environment.
    resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
    env: {},
    // None of this process's flags (a loader, --inspect): the worker runs plain dist/ code.
    execArgv: [],
    stdout: true,
    stderr: true,
  })
  let end: GuestEnd | null = null
  let memoryBytes: number | null = null
  let tid: number | null = null
  let cpuMs: number | null = null
  const kill = () => void worker.terminate()
  stopper.stop = (violation) => {
    stopper.stopped ??= violation
    kill()
  }
  const wall = setTimeout(
    () =>
      stopper.stop({
        kind: 'timeout',
        limit: limits.wallTimeMs,
        message: `the guest ran past its wall-time limit of ${limits.wallTimeMs} ms`,
      }),
    limits.wallTimeMs,
  )
  const cpu = setInterval(() => {
    if (tid === null) return
    const used = threadCpuMs(tid)
    if (used === null) return
    cpuMs = used
    if (used > limits.cpuTimeMs)
      stopper.stop({
        kind: 'cpu-time',
        limit: limits.cpuTimeMs,
        message: `the guest used more than ${limits.cpuTimeMs} ms of CPU time`,
      })
  }, CPU_POLL_MS)
  const onMessage = (message: WorkerMessage) => {
    if (typeof message !== 'object' || message === null) return
    if (message.kind === 'ready' && tid === null && Number.isSafeInteger(message.tid)) tid = message.tid
    else if (message.kind === 'done' && end === null) {
      end = message.end
      memoryBytes = typeof message.memoryBytes === 'number' ? message.memoryBytes : null
      // Its last CPU reading, before the thread goes.
      if (tid !== null) cpuMs = threadCpuMs(tid) ?? cpuMs
    } else if (message.kind === 'call' && stopper.stopped === null) {
      void handle(message.call).then((reply) => {
        if (reply && stopper.stopped === null) answer(port1, control, reply)
      })
    }
  }
  port1.on('message', onMessage)
  // Anything the worker's own code printed (never the guest's: it has no fd) is read and dropped.
  worker.stdout.resume()
  worker.stderr.resume()
  let crashed: GuestEnd | null = null
  worker.on('error', (error: Error & { code?: string }) => {
    crashed = { kind: 'crashed', message: error.message, memory: error.code === 'ERR_WORKER_OUT_OF_MEMORY' }
  })
  return new Promise((resolve) => {
    worker.on('exit', () => {
      // Its last words may still be queued behind its exit: read them first.
      for (let m = receiveMessageOnPort(port1); m; m = receiveMessageOnPort(port1))
        onMessage(m.message as WorkerMessage)
      clearTimeout(wall)
      clearInterval(cpu)
      port1.close()
      resolve({ end: end ?? crashed, memoryBytes, cpuMs })
    })
  })
}
