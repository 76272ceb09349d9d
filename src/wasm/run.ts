// loadWasm checks and clamps a module once; runWasm runs it under limits, in a worker or a sandbox of its
// own, and answers its host calls (the import sets: the seed's `platform_sandbox`, `cordon`, a WASI
// preview1 subset without a filesystem) through one HostSession. See docs/wasm.md.
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { PolicyError } from '../errors.js'
import type { ValType } from './abi.js'
import { HostSession } from './host.js'
import { IMPORT_SETS } from './imports/sets.js'
import { checkImports, clampMemory, type ExportInfo, type ImportInfo, inspectModule, PAGE } from './module.js'
import { parseWasmOptions, type WasmOptions, type WasmPolicy, wasmLimitsSchema } from './options.js'
import { classify, type WasmResult } from './result.js'
import { type RuntimeEnd, runInWorker, type Stopper } from './runtime.js'
import { runInSandbox } from './sandboxed.js'

/** Where a module comes from: its bytes, or a file (a path or a file: URL). */
export type WasmSource = Uint8Array | ArrayBuffer | string | URL

export interface LoadWasmOptions {
  /** The most linear memory the guest may have: the module's declared maximum is rewritten to it. Default 256M. */
  memoryBytes?: number | string
}

interface Compiled {
  bytes: Uint8Array<ArrayBuffer>
  module: WebAssembly.Module
}

/** A checked module, compiled once per memory limit; runWasm runs it as often as asked. Made by loadWasm
 * (the package exports it as a type only). */
export class WasmModule {
  /** @internal */
  private readonly compiled = new Map<number, Promise<Compiled>>()

  /** @internal */
  constructor(
    /** The file's name, or `module`: WASI's argv[0] by default. */
    readonly name: string,
    readonly imports: readonly ImportInfo[],
    readonly exports: readonly ExportInfo[],
    /** The memory limit it was loaded with, in bytes. */
    readonly memoryBytes: number,
    /** @internal */
    private readonly source: Uint8Array<ArrayBuffer>,
  ) {}

  /** @internal The module clamped to `maxBytes`, compiled. */
  compiledFor(maxBytes: number): Promise<Compiled> {
    let entry = this.compiled.get(maxBytes)
    if (!entry) {
      const bytes = clampMemory(this.source, Math.floor(maxBytes / PAGE))
      entry = WebAssembly.compile(bytes).then((module) => ({ bytes, module }))
      this.compiled.set(maxBytes, entry)
    }
    return entry
  }
}

/** The module's bytes: a copy, so that the caller changing theirs later changes nothing here. */
async function bytesOf(source: WasmSource): Promise<{ bytes: Uint8Array<ArrayBuffer>; name: string }> {
  if (source instanceof Uint8Array) return { bytes: source.slice(), name: 'module' }
  if (source instanceof ArrayBuffer) return { bytes: new Uint8Array(source.slice(0)), name: 'module' }
  if (typeof source !== 'string' && !(source instanceof URL))
    throw new PolicyError('module', 'must be a module from loadWasm, its bytes, or a path or file: URL')
  const file =
    source instanceof URL || source.startsWith('file:') ? fileURLToPath(source) : path.resolve(source)
  try {
    return { bytes: new Uint8Array(await readFile(file)), name: path.basename(file) }
  } catch (error) {
    throw new PolicyError('module', `${file} cannot be read (${(error as NodeJS.ErrnoException).code})`)
  }
}

/**
 * Reads, checks and compiles a module: refuses (PolicyError `module`) one that is not valid, imports what no
 * import set provides (or with another signature), imports its memory, or has a shared or 64-bit memory;
 * rewrites its memory's maximum to `memoryBytes`.
 */
export async function loadWasm(source: WasmSource, options: LoadWasmOptions = {}): Promise<WasmModule> {
  const limit = wasmLimitsSchema.shape.memoryBytes.safeParse(options.memoryBytes)
  if (!limit.success) throw new PolicyError('memoryBytes', limit.error.issues[0]?.message ?? 'invalid')
  const { bytes, name } = await bytesOf(source)
  const info = inspectModule(bytes)
  checkImports(info, IMPORT_SETS)
  const mod = new WasmModule(name, info.imports, info.exports, limit.data, bytes)
  await mod.compiledFor(limit.data)
  return mod
}

const I32_MIN = -(2 ** 31)
const U32_MAX = 2 ** 32 - 1
const I64_MIN = -(2n ** 63n)
const U64_MAX = 2n ** 64n - 1n

/** An argument as the export's parameter takes it; PolicyError `args.N` when it cannot be one. */
function argument(value: number | bigint | string, type: ValType, i: number): number | bigint {
  const bad = (what: string): never => {
    throw new PolicyError(
      `args.${i}`,
      `must be ${what}, got ${typeof value === 'bigint' ? `${value}n` : JSON.stringify(value)}`,
    )
  }
  const integer =
    typeof value === 'string' ? (/^-?\d+$/.test(value.trim()) ? BigInt(value.trim()) : null) : value
  switch (type) {
    case 'i32': {
      const n = typeof integer === 'bigint' ? Number(integer) : integer
      if (n === null || !Number.isInteger(n) || n < I32_MIN || n > U32_MAX) return bad('a 32-bit integer')
      return n | 0
    }
    case 'i64': {
      const n = typeof integer === 'number' && Number.isSafeInteger(integer) ? BigInt(integer) : integer
      if (typeof n !== 'bigint' || n < I64_MIN || n > U64_MAX) return bad('a 64-bit integer')
      return BigInt.asIntN(64, n)
    }
    case 'f32':
    case 'f64': {
      const n = typeof value === 'string' ? Number(value) : Number(value)
      if (typeof value === 'string' && (value.trim() === '' || (Number.isNaN(n) && value.trim() !== 'NaN')))
        return bad('a number')
      return n
    }
    default:
      return bad(`of a type cordon cannot pass (${type})`)
  }
}

/** The export to call and its arguments, checked against its signature. */
function entry(mod: WasmModule, policy: WasmPolicy): { invoke: string; args: (number | bigint)[] } {
  const names = mod.exports.filter((e) => e.kind === 'function').map((e) => e.name)
  const invoke = policy.invoke ?? '_start'
  const found = mod.exports.find((e) => e.name === invoke && e.kind === 'function')
  if (!found?.signature) {
    const list = names.length > 0 ? names.join(', ') : 'none'
    const what =
      policy.invoke === undefined
        ? 'exports no _start: name the export to call'
        : `has no exported function "${invoke}"`
    throw new PolicyError('invoke', `the module ${what} (its functions: ${list})`)
  }
  const { params, results } = found.signature
  if (results.length > 1)
    throw new PolicyError('invoke', `${invoke} returns ${results.length} values; cordon takes one at most`)
  if (policy.args.length !== params.length)
    throw new PolicyError(
      'args',
      `${invoke} takes ${params.length} arguments (${params.join(', ')}), got ${policy.args.length}`,
    )
  return { invoke, args: policy.args.map((v, i) => argument(v, params[i]!, i)) }
}

/**
 * Runs the guest to its end: the export `invoke` (default `_start`) with `args`, its imports answered by
 * the host, each exec a run() under `exec.options`. Resolves with a WasmResult whatever the guest does;
 * throws PolicyError for invalid options or a module it refuses (naming the field).
 */
export async function runWasm(
  module: WasmModule | WasmSource,
  options: WasmOptions = {},
): Promise<WasmResult> {
  const policy = parseWasmOptions(options)
  const explicit = options.limits?.memoryBytes !== undefined
  const mod =
    module instanceof WasmModule ? module : await loadWasm(module, { memoryBytes: policy.limits.memoryBytes })
  const maxMemoryBytes =
    explicit || !(module instanceof WasmModule) ? policy.limits.memoryBytes : mod.memoryBytes
  const { invoke, args } = entry(mod, policy)
  const compiled = await mod.compiledFor(maxMemoryBytes)
  const withArgv: WasmPolicy = { ...policy, argv: policy.argv ?? [mod.name] }
  const stopper: Stopper = {
    stopped: null,
    stop(violation) {
      stopper.stopped ??= violation
    },
  }
  const session = new HostSession(withArgv, mod.imports, (v) => stopper.stop(v))
  const started = performance.now()
  const onAbort = () => stopper.stop({ kind: 'canceled', limit: 'signal', message: 'canceled' })
  let ran: RuntimeEnd = { end: null, memoryBytes: null, cpuMs: null }
  try {
    if (policy.signal?.aborted) onAbort()
    else {
      policy.signal?.addEventListener('abort', onAbort, { once: true })
      const guest = {
        ...compiled,
        imports: [...mod.imports],
        invoke,
        args,
        memoryExport: policy.memoryExport,
        maxMemoryBytes,
      }
      ran =
        policy.isolation === 'worker'
          ? await runInWorker(guest, (call) => session.handle(call), policy.limits, stopper)
          : await runInSandbox(guest, session, policy, stopper)
    }
  } finally {
    policy.signal?.removeEventListener('abort', onAbort)
    await session.close()
  }
  if (session.fatal) throw session.fatal
  const { status, violation } = classify(ran.end, stopper.stopped, maxMemoryBytes)
  return {
    status,
    value: ran.end?.kind === 'returned' && !stopper.stopped ? ran.end.value : null,
    exitCode: ran.end?.kind === 'exit' ? ran.end.code : null,
    violation,
    wallMs: Math.round(performance.now() - started),
    cpuMs: ran.cpuMs === null ? null : Math.round(ran.cpuMs),
    memoryBytes: ran.memoryBytes,
    isolation: policy.isolation,
    hostCalls: Object.fromEntries(session.hostCalls),
    execCount: session.execCount,
    execs: session.execs,
    logs: session.logs,
    logsTruncated: session.logsTruncated,
    ...session.output(),
    truncated: session.truncated,
    outputBytes: session.outputBytes,
    clock: { mode: session.clock.mode, nowMs: session.clock.peekMs() },
  }
}
