// `cordon serve --warm N`: up to N warm members (the library's createSandbox({ warm }), see spawner.md)
// ready for the service's runs, each paired with a workspace of its own.
//
// A member's mounts are made before its run, so the workspace it binds (the run's cwd and one writable
// path) must exist before the run does: each member is a sandbox of one member whose options are the
// service's own for a run in that workspace (worker.ts: the data dir's guard, the operator's host paths),
// made in a fresh workspace (a tmpfs slot's directory as root, as a cold run's). A run whose request fits
// the members' shape takes one: its files are written into the paired workspace, and the member executes
// its program with everything of the run's own (its key's secrets, env, limits, redaction, stdin, signal)
// given at activation. The shape is the default request's: a request asking for another network, a root
// filesystem, denied syscalls, merged output, the process tier or a tmpfs size runs cold, as it would
// without --warm, and so does any run when no member is ready. The run's `started` event says which path
// it took (`warm`).
//
// - Single use: the sandbox is closed once its run has started (no member is made again in it), and its
//   workspace is removed after the run as a cold run's is; a new pair is made in its place only then.
// - Nothing of one run in the next: each member is made from the service's options alone, in an empty
//   workspace no run has used; a run's key, env and files reach only its own member.
// - Bounded and owned: at most MAX_WARM pairs, made by this server, destroyed when it closes; a member
//   unused for IDLE_MS is recycled by its sandbox (made again in the same, still empty, workspace).
import { randomUUID } from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import { createSandbox, policySchema, type RunOptions, type Sandbox, type Spawner, start } from '../index.js'
import type { HostOptions, RunRequest } from './request.js'
import { dataDirGuard, hostPaths, type WarmLease, type WarmRun, type WarmSlots } from './worker.js'
import type { Workspace, Workspaces } from './workspace.js'

/** At most this many members (each is three processes, a uid of the pool and a workspace). */
export const MAX_WARM = 64
/** A member unused this long is recycled (made again): nothing in one is older than that. */
const IDLE_MS = 60_000
/** How long making pauses after a workspace could not be made (a run that ends or finds none tries again). */
const PAUSE_MS = 10_000

/** The options a run hands its member at activation: they do not change what the member made. */
const PER_RUN = new Set([
  'env',
  'passEnv',
  'limits',
  'redact',
  'allow',
  'deny',
  'clock',
  'signal',
  'stdin',
  'onLog',
  'onOutput',
])

/** A request's options that may leave its run the members' shape (the rest make it cold). */
const REQUEST_FITS = new Set(['env', 'limits', 'redact', 'allow', 'deny', 'clock', 'network', 'isolation'])

/** The schema's defaults: what a member is made with where the service's options say nothing. */
let defaults: Record<string, unknown> | undefined
const schemaDefaults = () => {
  defaults ??= policySchema.parse({}) as Record<string, unknown>
  return defaults
}
const defaultTmpfs = () => (schemaDefaults().limits as { tmpfsBytes: number }).tmpfsBytes

/**
 * Why a request's run cannot have a member (it runs cold), or null when it may. A stored request has every
 * default filled in: an option at its default is the members' shape.
 */
export function coldReason(request: RunRequest): string | null {
  const options = request.options as Record<string, unknown>
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined || REQUEST_FITS.has(key)) continue
    if (!isDeepStrictEqual(value, schemaDefaults()[key])) return `options.${key}`
  }
  const { isolation, network, limits } = request.options
  if (isolation !== undefined && isolation !== 'auto' && isolation !== 'namespace') return 'options.isolation'
  if (network !== undefined && network !== 'none') return 'options.network'
  if (limits?.tmpfsBytes !== undefined && limits.tmpfsBytes !== defaultTmpfs())
    return 'options.limits.tmpfsBytes'
  return null
}

export interface WarmMembersOptions {
  size: number
  dataDir: string
  workspaces: Workspaces
  host: HostOptions | undefined
  spawner: Spawner | undefined
  /** Told when a member's workspace could not be made (making pauses for PAUSE_MS). */
  onError?: (error: Error) => void
}

/** How the members fare: those ready now, and the runs that took one or ran cold. */
export interface WarmMembersStats {
  size: number
  ready: number
  warmRuns: number
  coldRuns: number
}

interface Pair {
  workspace: Workspace
  sandbox: Sandbox<Buffer>
  base: RunOptions<Buffer>
}

export class WarmMembers implements WarmSlots {
  private readonly idle = new Set<Pair>()
  private making = 0
  /** After a workspace could not be made, none is tried again before this (Date.now() ms). */
  private pausedUntil = 0
  private closed = false
  private readonly counts = { warmRuns: 0, coldRuns: 0 }

  constructor(private readonly options: WarmMembersOptions) {
    this.fill()
  }

  /** A ready member and its workspace for this request's run, or null: the run takes the cold path. */
  take(request: RunRequest): WarmLease | null {
    if (this.closed || coldReason(request) !== null) {
      this.counts.coldRuns++
      return null
    }
    for (const pair of this.idle) {
      if ((pair.sandbox.stats().warm?.ready ?? 0) < 1) continue
      this.idle.delete(pair)
      return this.lease(pair)
    }
    this.counts.coldRuns++
    this.fill()
    return null
  }

  stats(): WarmMembersStats {
    let ready = 0
    for (const pair of this.idle) ready += pair.sandbox.stats().warm?.ready ?? 0
    return { size: this.options.size, ready, ...this.counts }
  }

  /** Destroys the members not taken (the runs' own end with their runs) and removes their workspaces. */
  async close(): Promise<void> {
    this.closed = true
    const pairs = [...this.idle]
    this.idle.clear()
    await Promise.all(pairs.map((pair) => this.destroy(pair)))
  }

  private lease(pair: Pair): WarmLease {
    const { workspace } = pair
    let released = false
    const release = async (sandboxGone: boolean) => {
      if (released) return
      released = true
      // The member first (when its run never started, it is still waiting), then its workspace.
      await pair.sandbox.close()
      await workspace.release(sandboxGone)
      this.fill()
    }
    return {
      workspace: {
        dir: workspace.dir,
        bound: workspace.bound,
        watch: (onOver) => workspace.watch(onOver),
        release,
      },
      start: (cmd, options) => this.start(pair, cmd, options),
    }
  }

  /**
   * The run in its member, or cold in the member's workspace when its options are not the member's shape
   * after all (the library says the same of a member's key): then the member goes unused.
   */
  private start(pair: Pair, cmd: readonly string[], options: RunOptions<Buffer>): WarmRun {
    const perRun = splitOptions(options, pair.base)
    if (perRun === null) {
      void pair.sandbox.close()
      this.counts.coldRuns++
      return { handle: start(cmd, options), warm: false }
    }
    let handle: WarmRun['handle']
    try {
      handle = pair.sandbox.start(cmd, perRun)
    } finally {
      // A member is single use: one that ran goes with its run, one that did not fit goes now.
      void pair.sandbox.close()
    }
    const warm = (pair.sandbox.stats().warm?.hits ?? 0) > 0
    this.counts[warm ? 'warmRuns' : 'coldRuns']++
    return { handle, warm }
  }

  /** Makes pairs until there are `size` (idle or being made), one workspace at a time. */
  private fill(): void {
    if (this.closed || this.making > 0 || this.idle.size >= this.options.size) return
    if (Date.now() < this.pausedUntil) return
    this.making++
    void this.makeOne().finally(() => {
      this.making--
      this.fill()
    })
  }

  private async makeOne(): Promise<void> {
    let workspace: Workspace
    try {
      workspace = await this.options.workspaces.acquire(`warm-${randomUUID()}`)
    } catch (error) {
      this.options.onError?.(error as Error)
      this.pausedUntil = Date.now() + PAUSE_MS
      return
    }
    if (this.closed) {
      await workspace.release(true)
      return
    }
    const base = memberOptions(this.options, workspace.dir)
    const sandbox = createSandbox({ ...base, warm: { members: 1, idleMs: IDLE_MS } })
    this.idle.add({ workspace, sandbox, base })
  }

  private async destroy(pair: Pair): Promise<void> {
    await pair.sandbox.close().catch(() => undefined)
    await pair.workspace.release(true).catch(() => undefined)
  }
}

/**
 * What a member is made with: the options the worker gives a run in `dir` (worker.ts, runIn) that are not
 * the run's own, the namespace tier (members have no other) and the default request's network.
 */
function memberOptions(options: WarmMembersOptions, dir: string): RunOptions<Buffer> {
  const guard = dataDirGuard(undefined, options.dataDir, process.getuid?.() === 0)
  const hide = 'refused' in guard ? undefined : guard.hide
  const { passEnv: _perRun, ...paths } = hostPaths(options.host ?? {}, dir, hide)
  return {
    ...('refused' in guard ? {} : guard),
    ...paths,
    isolation: 'namespace',
    network: 'none',
    encoding: 'buffer',
    ...(options.spawner ? { spawner: options.spawner } : {}),
  }
}

/**
 * A run's options without what its member was made with, or null when they differ in anything else: then
 * the run is not the member's shape. `auto` isolation is the namespace tier wherever a member exists.
 */
function splitOptions(
  options: RunOptions<Buffer>,
  base: RunOptions<Buffer>,
): Omit<RunOptions<Buffer>, 'encoding'> | null {
  const perRun: Record<string, unknown> = {}
  const given = options as Record<string, unknown>
  const made = base as Record<string, unknown>
  for (const [key, value] of Object.entries(given)) {
    if (value === undefined) continue
    if (PER_RUN.has(key)) perRun[key] = value
    else if (key === 'isolation' && (value === 'auto' || value === 'namespace')) continue
    else if (!isDeepStrictEqual(value, made[key] ?? schemaDefaults()[key])) return null
  }
  for (const key of Object.keys(made)) {
    if (key !== 'isolation' && given[key] === undefined) return null
  }
  // The tmpfs's size is the member's own (made with the default): the run's is that, or it is not its shape.
  const limits = perRun.limits as RunOptions['limits']
  if (limits?.tmpfsBytes !== undefined) {
    if (limits.tmpfsBytes !== defaultTmpfs()) return null
    const { tmpfsBytes: _made, ...rest } = limits
    perRun.limits = rest
  }
  return perRun as Omit<RunOptions<Buffer>, 'encoding'>
}
