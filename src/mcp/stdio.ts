// `cordon mcp`: an MCP server on stdio for a local agent. Sandboxes run in this process, through a service
// of its own (createService) on a private data dir that is removed at exit, with one key made here whose
// ceilings are the operator's flags: `--timeout 2m` is the most any tool call may ask, `--net` the most
// network, and the flags no tool input names (`--allow`, `--env`, `--redact`…) are set in every run. So the
// stdio face and `/mcp` on `cordon serve` are one implementation (tools.ts) on one Service contract.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { PolicyError } from '../errors.js'
import { callFunction, type FunctionResult, policySchema, type RunOptions } from '../index.js'
import { LIMIT_NAMES, newKeyRecord } from '../service/key-schema.js'
import type { HostOptions } from '../service/request.js'
import { createService } from '../service/service.js'
import { type KeyRecord, type Service, ServiceError } from '../service/types.js'
import { DEFAULT_OUTPUT_BUDGET } from './budget.js'
import { createMcpServer, type McpFunctions } from './tools.js'

/** Parses `--output-budget` (a size as the options write one: `8K`, `16K`). */
export function parseBudget(value: string | number): number {
  const size = policySchema.shape.limits.unwrap().shape.maxOutputBytes.unwrap()
  const parsed = size.safeParse(value)
  if (!parsed.success || parsed.data < 256)
    throw new PolicyError(
      'output-budget',
      `must be a size of at least 256B (such as 8K), got ${String(value)}`,
    )
  return parsed.data
}

/** `NAME=FILE#EXPORT` (`--function`), the file resolved against the working directory. */
export function parseFunction(text: string): McpFunctionSpec {
  const m = /^([A-Za-z_][\w.-]*)=(.+)#([^#]+)$/.exec(text)
  if (!m) throw new PolicyError('function', `must be NAME=FILE#EXPORT, got "${text}"`)
  return { name: m[1] as string, module: path.resolve(m[2] as string), exportName: m[3] as string }
}

/** A function `call_function` may call: its name for the model, and FILE#export. */
export interface McpFunctionSpec {
  name: string
  module: string
  exportName: string
}

export interface McpStdioOptions {
  /** The run options as `cordon run`'s flags give them (policyInput): limits are the ceilings. */
  policy: Record<string, unknown>
  /** Bytes of each text a tool returns (default 8 KiB). */
  budget?: number
  functions?: McpFunctionSpec[]
  /** Runs at once (default 2). */
  concurrency?: number
  /** Runs kept, newest first (default 200): older finished ones are removed with their output. */
  keepRuns?: number
  version?: string
  stdin?: NodeJS.ReadableStream & { off(event: string, fn: (...a: unknown[]) => void): unknown }
  stdout?: NodeJS.WritableStream
}

/**
 * Fields of the options that name host paths or host state: the operator's alone. They go to the service
 * (hostOptions), which sets them in every run; no tool input can name them. So does a `rootfs` given as a
 * path (below).
 */
const HOST_FIELDS = ['cwd', 'writable', 'readable', 'hide', 'passEnv'] as const

/** Tool calls waiting at once (as /mcp allows a key). */
const MAX_WAITS = 32

/** Runs `cordon mcp` keeps by default: each holds up to --max-output in $TMPDIR, often RAM-backed. */
export const DEFAULT_KEEP_RUNS = 200

/**
 * The key's runs, oldest first, of which only the newest `keep` stay: each submission removes the finished
 * ones past them, with their output (a model that runs in a loop would otherwise fill the private data
 * dir, by up to --max-output a run). Kept by id here, not listed from the store: a listing parses every
 * run's request and result, megabytes a run, at every submission.
 */
function newestRuns(service: Service, keep: number) {
  const order: string[] = []
  return (key: KeyRecord, id: string): void => {
    order.push(id)
    for (let i = 0; i < order.length - keep; ) {
      try {
        service.remove(key, order[i] as string)
      } catch (error) {
        // Still queued or running: it goes at a later submission. Gone already: forgotten.
        if (error instanceof ServiceError && error.code === 'conflict') {
          i++
          continue
        }
      }
      order.splice(i, 1)
    }
  }
}

export interface McpStdioServer {
  /** Resolves once the client went away (stdin ended) or close() was called, and all is cleaned up. */
  closed: Promise<void>
  close(): Promise<void>
}

/**
 * The key's ceilings, every run's fixed options and the host paths (relative ones resolved against the
 * working directory), from the operator's policy. Throws PolicyError.
 */
export function operatorPolicy(policy: Record<string, unknown>): {
  ceilings: Record<string, unknown>
  fixed: Record<string, unknown>
  host: HostOptions | undefined
} {
  // Validated (and defaults applied) by the library's own schema: a bad flag names its field.
  const result = policySchema.safeParse(policy)
  if (!result.success) {
    const issue = result.error.issues[0]
    throw new PolicyError((issue?.path ?? []).map(String).join('.'), issue?.message ?? 'invalid')
  }
  const parsed = result.data
  const limits = Object.fromEntries(LIMIT_NAMES.map((name) => [name, parsed.limits[name]]))
  const ceilings: Record<string, unknown> = { limits, network: parsed.network }
  if (parsed.isolation !== 'auto') ceilings.isolation = parsed.isolation
  // A rootfs by name is a ceiling a key may hold, and every run's; a path (the library tells them apart by
  // a slash) is host state, which the service takes only from the operator: a host option. Then a tool
  // input may name no root filesystem (an empty ceiling).
  const rootfsPath = typeof parsed.rootfs === 'string' && parsed.rootfs.includes('/')
  if (typeof parsed.rootfs === 'string') ceilings.rootfs = rootfsPath ? [] : [parsed.rootfs]
  const { limits: _limits, ...rest } = policy
  const fixed: Record<string, unknown> = {}
  const host: Record<string, unknown> = {}
  for (const [field, value] of Object.entries(rest)) {
    if (field === 'rootfs' && rootfsPath) host[field] = path.resolve(String(value))
    else if (!(HOST_FIELDS as readonly string[]).includes(field)) fixed[field] = value
    else if (field === 'passEnv') host[field] = value
    else if (typeof value === 'string') host[field] = path.resolve(value)
    else if (Array.isArray(value)) host[field] = value.map((p) => path.resolve(String(p)))
  }
  return { ceilings, fixed, host: Object.keys(host).length > 0 ? (host as HostOptions) : undefined }
}

/**
 * One run of `true` with the operator's host paths, before any tool call: a path the sandboxes cannot
 * reach (as root they run as a pool uid, which another user's 0700 home shuts out) is refused now, by the
 * library's own check and words, naming the flag, rather than in every run.
 */
async function probeHostPaths(service: Service, key: KeyRecord): Promise<void> {
  const submitted = service.submit(key, { cmd: ['true'], metadata: { via: 'mcp-probe' } })
  const run = await service.wait(key, submitted.id, 30_000)
  try {
    service.remove(key, run.id)
  } catch {
    // still running (a slow host): it is only a probe
  }
  const v = run.result?.violation
  if (v?.kind === 'error' && typeof v.limit === 'string' && v.limit.startsWith('options.')) {
    const field = v.limit.slice('options.'.length)
    // The library's PolicyError message, which starts with its field: said once.
    const reason = v.message.startsWith(`${field}: `) ? v.message.slice(field.length + 2) : v.message
    throw new PolicyError(field, reason)
  }
}

export async function startMcpStdio(options: McpStdioOptions): Promise<McpStdioServer> {
  const { ceilings, fixed, host } = operatorPolicy(options.policy)
  const dataDir = mkdtempSync(path.join(tmpdir(), 'cordon-mcp-'))
  const removeDir = () => rmSync(dataDir, { recursive: true, force: true })
  try {
    const { service } = await createService({
      dataDir,
      concurrency: options.concurrency ?? 2,
      // The one key's ceilings are the operator's flags, every limit of them (--max-output included):
      // no server default is put above the operator's word.
      limitCeilings: {},
      ...(host ? { hostOptions: host } : {}),
    })
    const { record } = newKeyRecord({ name: 'mcp', scopes: ['runs:write', 'runs:read'], ceilings })
    service.store.createKey(record)
    if (host) {
      try {
        await probeHostPaths(service, record)
      } catch (error) {
        await service.close()
        throw error
      }
    }

    const specs = new Map((options.functions ?? []).map((f) => [f.name, f]))
    // A function runs in a sandbox of its own, outside the service's queue: as many at once as runs
    // (--concurrency), the rest waiting their turn, or a model calling it in parallel gets a sandbox a call.
    const slots = gate(options.concurrency ?? 2)
    const functions: McpFunctions | undefined =
      specs.size === 0
        ? undefined
        : {
            names: [...specs.keys()],
            async call(name, args, signal): Promise<FunctionResult> {
              const spec = specs.get(name)
              if (!spec) throw new Error(`no function ${name}`)
              const release = await slots.take(signal)
              try {
                return await callFunction(spec.module, spec.exportName, args, {
                  ...(options.policy as RunOptions),
                  signal,
                })
              } finally {
                release()
              }
            },
          }
    // Waiting calls at once (run, read_output), as /mcp allows a key: each waiting read_output polls the
    // store every 200 ms, and one client sending thousands in parallel would keep this process polling.
    // A call past the bound answers at once, as with wait_ms 0.
    let waits = 0
    const holds = {
      take() {
        if (waits >= MAX_WAITS) return false
        waits++
        return true
      },
      give() {
        waits--
      },
    }
    // Every submission (a run tool call) makes room: the newest --keep-runs runs stay.
    const made = newestRuns(service, options.keepRuns ?? DEFAULT_KEEP_RUNS)
    const kept: Service = {
      ...service,
      submit(key, body) {
        const run = service.submit(key, body)
        made(key, run.id)
        return run
      },
    }
    const server = createMcpServer({
      service: kept,
      key: record,
      budget: options.budget ?? DEFAULT_OUTPUT_BUDGET,
      fixedOptions: fixed,
      persistent: host?.writable ?? [],
      holds,
      ...(functions ? { functions } : {}),
      ...(options.version ? { version: options.version } : {}),
    })
    const stdin = options.stdin ?? process.stdin
    const transport = new StdioServerTransport(
      stdin as typeof process.stdin,
      (options.stdout ?? process.stdout) as typeof process.stdout,
    )

    let closing: Promise<void> | null = null
    let resolveClosed!: () => void
    const closed = new Promise<void>((resolve) => {
      resolveClosed = resolve
    })
    const close = () => {
      closing ??= (async () => {
        stdin.off('end', onEnd)
        await server.close().catch(() => undefined)
        // Runs still going are canceled: their sandboxes end with the server.
        await service.close()
        removeDir()
        resolveClosed()
      })()
      return closing
    }
    const onEnd = () => void close()
    // The client closing our stdin is how it says goodbye (the spec's stdio shutdown).
    stdin.on('end', onEnd)
    await server.connect(transport)
    return { closed, close }
  } catch (error) {
    removeDir()
    throw error
  }
}

/**
 * At most `n` holders at once; the others wait in order. A wait whose signal aborts ends then (the call
 * goes on to the library, which answers an aborted signal as canceled without starting a sandbox).
 */
function gate(n: number): { take(signal: AbortSignal): Promise<() => void> } {
  let free = n
  const waiting: (() => void)[] = []
  const release = () => {
    const next = waiting.shift()
    if (next) next()
    else free++
  }
  return {
    take(signal) {
      if (free > 0 || signal.aborted) {
        if (!signal.aborted) free--
        return Promise.resolve(signal.aborted ? () => undefined : once(release))
      }
      return new Promise((resolve) => {
        const turn = () => {
          signal.removeEventListener('abort', gone)
          resolve(once(release))
        }
        const gone = () => {
          const at = waiting.indexOf(turn)
          if (at >= 0) waiting.splice(at, 1)
          resolve(() => undefined)
        }
        waiting.push(turn)
        signal.addEventListener('abort', gone, { once: true })
      })
    },
  }
}

const once = (fn: () => void) => {
  let done = false
  return () => {
    if (!done) {
      done = true
      fn()
    }
  }
}

/** The `cordon mcp` command: serve until the client closes stdin, or SIGTERM/SIGINT/SIGHUP. */
export async function mcpUntilClosed(options: McpStdioOptions): Promise<void> {
  const server = await startMcpStdio(options)
  const stop = () => void server.close()
  // SIGHUP too: its default would end the process at once, the sandboxes going with it (they die with
  // their parent) but the private data dir, holding every run's output, left in $TMPDIR.
  const signals = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const
  for (const signal of signals) process.on(signal, stop)
  await server.closed
  for (const signal of signals) process.removeListener(signal, stop)
}
