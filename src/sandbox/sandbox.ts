// A reusable sandbox: one policy for many runs, with running totals and an optional quota. Each object
// keeps its own state, so any number coexist in one process.
import { CordonError, PolicyError } from '../errors.js'
import { callFunction, type FunctionResult } from '../functions/lazy-call.js'
import type { RunResult, ViolationKind } from '../policy/result.js'
import type { AnyRunOptions, OutputData, RunOptions } from '../policy/schema.js'
import { launch, type RunHandle } from '../run/launch.js'
import { SpawnerError } from '../spawner/spawner.js'
import { withinSandbox } from './ceilings.js'
import { DEFAULT_IDLE_MS, MAX_MEMBERS, WarmPool, type WarmStats } from './pool.js'

/** `D`: what output is made of in every run of the sandbox (Buffer with `encoding: 'buffer'`). */
export type SandboxOptions<D extends OutputData = string> = RunOptions<D> & {
  /** Refuse runs past this many (a QuotaError), e.g. one grader submission's budget. */
  maxRuns?: number
  /**
   * Keep this many warm members ready (namespace tier): sandboxes made ahead of their runs, each waiting
   * to run one program; `idleMs` (default 60 s) recycles one unused that long. See spawner.md.
   */
  warm?: number | { members: number; idleMs?: number }
}

/** A run's own options: the sandbox's encoding holds for all its runs, so it is not among them. */
export type SandboxRunOptions<D extends OutputData = string> = Omit<RunOptions<D>, 'encoding'>

export interface SandboxStats {
  runs: number
  violations: Partial<Record<ViolationKind, number>>
  cpuMs: number
  wallMs: number
  /** With `warm`: its members, and how the runs found them. */
  warm?: WarmStats
}

/** A sandbox that is collected unclosed takes its warm members with it. */
const unclosed = new FinalizationRegistry<WarmPool>((pool) => void pool.close().catch(() => {}))

/** `warm` as given: a number of members, or { members, idleMs }; throws PolicyError naming it. */
function warmOptions(warm: SandboxOptions['warm']): { members: number; idleMs: number } | null {
  if (warm === undefined) return null
  const { members, idleMs = DEFAULT_IDLE_MS } = typeof warm === 'number' ? { members: warm } : warm
  if (!(Number.isInteger(members) && members >= 0 && members <= MAX_MEMBERS))
    throw new PolicyError('warm', `must be a whole number from 0 to ${MAX_MEMBERS}, got ${members}`)
  if (!(Number.isInteger(idleMs) && idleMs >= 100))
    throw new PolicyError('warm.idleMs', `must be a whole number of ms >= 100, got ${idleMs}`)
  return members > 0 ? { members, idleMs } : null
}

/** A run refused because the sandbox's quota is used up. */
export class QuotaError extends CordonError {
  override readonly name = 'QuotaError'
}

/**
 * Per-call options that leave a run's shape as the sandbox's (see plan/warm.ts): a run given only these may
 * fit a warm member. Any other per-call option is a cold run without the cost of trying (the member's key
 * would say so anyway; this only spares building the run's plan twice).
 */
const SHAPELESS = new Set([
  'stdin',
  'signal',
  'onOutput',
  'onLog',
  'env',
  'passEnv',
  'limits',
  'redact',
  'allow',
  'deny',
  'clock',
  'spawner',
  'encoding',
])
const shapeless = (options: AnyRunOptions | undefined) =>
  !options ||
  (Object.keys(options).every((k) => SHAPELESS.has(k)) && options.limits?.tmpfsBytes === undefined)

/**
 * Per-call options over the sandbox's: objects (limits, env, cgroup, uidPool) merge, the rest replaces,
 * within the sandbox's as ceilings (ceilings.ts): a run may tighten them, never loosen them.
 */
function merge(base: AnyRunOptions, over: AnyRunOptions): AnyRunOptions {
  const encoding = base.encoding ?? 'utf8'
  if (over.encoding !== undefined && over.encoding !== encoding) {
    throw new PolicyError('encoding', `is the sandbox's own (${encoding}): give it to createSandbox()`)
  }
  const out: Record<string, unknown> = { ...base, ...over }
  for (const key of ['limits', 'env', 'cgroup', 'uidPool'] as const) {
    if (base[key] && over[key]) out[key] = { ...base[key], ...over[key] }
  }
  return withinSandbox(base, over, out) as AnyRunOptions
}

export class Sandbox<D extends OutputData = string> {
  private readonly base: AnyRunOptions
  private readonly maxRuns: number | undefined
  private readonly totals: SandboxStats = { runs: 0, violations: {}, cpuMs: 0, wallMs: 0 }
  private started = 0
  private readonly pool: WarmPool | null

  constructor(options?: SandboxOptions<D>) {
    const { maxRuns, warm, ...policy } = (options ?? {}) as Pick<SandboxOptions, 'maxRuns' | 'warm'> &
      AnyRunOptions
    if (maxRuns !== undefined && !(Number.isInteger(maxRuns) && maxRuns >= 0)) {
      throw new PolicyError('maxRuns', `must be a whole number >= 0, got ${maxRuns}`)
    }
    this.base = policy
    this.maxRuns = maxRuns
    const members = warmOptions(warm)
    this.pool = members && new WarmPool(policy, members.members, members.idleMs)
    if (this.pool) unclosed.register(this, this.pool, this)
  }

  /**
   * Count a run against the quota before it starts, so concurrent calls cannot overshoot it; returns the
   * refund for a call that then starts nothing (invalid input, a closed spawner): that was no run.
   */
  private admit(): () => void {
    if (this.maxRuns !== undefined && this.started >= this.maxRuns) {
      throw new QuotaError(`quota reached: this sandbox allows ${this.maxRuns} runs (maxRuns)`)
    }
    this.started++
    let refunded = false
    return () => {
      if (!refunded) this.started--
      refunded = true
    }
  }

  /** launch() with the sandbox's options, refunding the quota when it throws: then nothing started. */
  private launch(
    command: readonly string[],
    options: SandboxRunOptions<D> | undefined,
    interactive: boolean,
  ) {
    const refund = this.admit()
    try {
      const over = (options ?? {}) as AnyRunOptions
      const warm = this.pool && shapeless(over) ? this.pool : undefined
      return launch(command, merge(this.base, over), interactive, undefined, warm)
    } catch (error) {
      refund()
      throw error
    }
  }

  /** Add a finished run to the totals; returns it unchanged. */
  protected record<T extends RunResult<OutputData>>(result: T): T {
    this.totals.runs++
    this.totals.cpuMs += result.cpuMs ?? 0
    this.totals.wallMs += result.wallMs
    if (result.violation) {
      const kind = result.violation.kind
      this.totals.violations[kind] = (this.totals.violations[kind] ?? 0) + 1
    }
    return result
  }

  // The merged options carry the sandbox's encoding, which is what D says: the casts below only restate it.
  async run(command: readonly string[], options?: SandboxRunOptions<D>): Promise<RunResult<D>> {
    const handle = this.launch(command, options, false)
    return this.record(await handle.result) as RunResult<OutputData> as RunResult<D>
  }

  start(command: readonly string[], options?: SandboxRunOptions<D>): RunHandle<D> {
    const handle = this.launch(command, options, true)
    const result = handle.result.then((r) => this.record(r))
    return Object.assign(Object.create(handle) as RunHandle, {
      result,
    }) as RunHandle<OutputData> as RunHandle<D>
  }

  async callFunction<T = unknown>(
    module: string | URL,
    exportName: string,
    args: readonly unknown[] = [],
    options?: SandboxRunOptions<D>,
  ): Promise<FunctionResult<T, D>> {
    const refund = this.admit()
    let result: FunctionResult<T, OutputData>
    try {
      const merged = merge(this.base, (options ?? {}) as AnyRunOptions) as RunOptions
      result = await callFunction<T>(module, exportName, args, merged)
    } catch (error) {
      // What callFunction throws before its run starts is the caller's input or a closed spawner; once it
      // has started only the caller's own callbacks throw, and then it ran.
      if (error instanceof PolicyError || error instanceof SpawnerError) refund()
      throw error
    }
    return this.record(result) as FunctionResult<T, OutputData> as FunctionResult<T, D>
  }

  stats(): SandboxStats {
    return {
      ...this.totals,
      violations: { ...this.totals.violations },
      ...(this.pool ? { warm: this.pool.stats() } : {}),
    }
  }

  /**
   * Destroy the warm members that are ready (and make no more); runs under way go on to their end, and later
   * runs are cold. Without `warm` there is nothing to close.
   */
  async close(): Promise<void> {
    if (!this.pool) return
    unclosed.unregister(this)
    await this.pool.close()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}

export function createSandbox(options: SandboxOptions<Buffer>): Sandbox<Buffer>
export function createSandbox(options?: SandboxOptions): Sandbox
export function createSandbox(options?: SandboxOptions | SandboxOptions<Buffer>): Sandbox<OutputData> {
  return new Sandbox<OutputData>(options as SandboxOptions<OutputData>)
}
