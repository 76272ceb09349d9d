// The guest's thread: instantiates the module with the import sets' guest sides over the bridge, calls the
// export, and says how that ended. Runs in a worker of the host (isolation 'worker') or of a sandboxed node
// process (isolation 'sandbox'); it imports nothing of the engine, so a sandbox needs only dist/wasm/.
import { readFileSync } from 'node:fs'
import { type MessagePort, workerData } from 'node:worker_threads'
import type { GuestEnv } from './abi.js'
import { BridgeClient } from './bridge.js'
import { guestImports } from './imports/sets.js'
import type { ImportInfo } from './module.js'
import type { GuestEnd } from './result.js'

export interface WorkerInit {
  module: WebAssembly.Module
  control: SharedArrayBuffer
  port: MessagePort
  imports: ImportInfo[]
  invoke: string
  args: (number | bigint)[]
  memoryExport: string
  /** The memory's maximum as clamped, in bytes: a trap at it is the guest out of memory. */
  maxMemoryBytes: number
}

class GuestExit {
  constructor(readonly code: number) {}
}

const init = workerData as WorkerInit
const bridge = new BridgeClient(init.port, init.control)
// This thread's id, for its CPU time in /proc/self/task/<tid>/stat (`thread-self` is the reading thread).
bridge.post({ kind: 'ready', tid: Number(readFileSync('/proc/thread-self/stat', 'latin1').split(' ')[0]) })

let memory: WebAssembly.Memory | null = null
const env: GuestEnv = {
  memory: () => (memory ? new Uint8Array(memory.buffer) : null),
  call: (call) => bridge.call(call),
  exit(code) {
    throw new GuestExit(code)
  },
}

function finish(end: GuestEnd): void {
  bridge.post({ kind: 'done', end, memoryBytes: memory ? memory.buffer.byteLength : null })
  init.port.close()
}

try {
  const instance = new WebAssembly.Instance(init.module, guestImports(env, init.imports))
  const exported = instance.exports[init.memoryExport]
  if (exported instanceof WebAssembly.Memory) memory = exported
  const fn = instance.exports[init.invoke]
  if (typeof fn !== 'function') throw new TypeError(`the module has no exported function "${init.invoke}"`)
  const value: unknown = (fn as (...args: (number | bigint)[]) => unknown)(...init.args)
  finish({ kind: 'returned', value: typeof value === 'number' || typeof value === 'bigint' ? value : null })
} catch (error) {
  if (error instanceof GuestExit) finish({ kind: 'exit', code: error.code })
  else {
    const e = error instanceof Error ? error : new Error(String(error))
    const size = memory ? memory.buffer.byteLength : null
    finish({
      kind: 'trap',
      name: e.name,
      message: e.message,
      memoryBytes: size,
      // No room for one more page: the trap most likely followed a failed memory.grow.
      atMax: size !== null && size + 65536 > init.maxMemoryBytes,
    })
  }
}
