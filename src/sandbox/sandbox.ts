// A reusable sandbox: one policy for many runs, with running totals and an optional quota. Each object
// keeps its own state, so any number coexist in one process.
import { CordonError } from '../errors.js'
import { callFunction, type FunctionResult } from '../functions/call.js'
import type { RunOptions } from '../policy/schema.js'
import { type RunHandle, run, start } from '../run/launch.js'
import type { RunResult, ViolationKind } from '../run/result.js'

export interface SandboxOptions extends RunOptions {
  /** Refuse runs past this many (a QuotaError), e.g. one grader submission's budget. */
  maxRuns?: number
}

export interface SandboxStats {
  runs: number
  violations: Partial<Record<ViolationKind, number>>
  cpuMs: number
  wallMs: number
}

/** A run refused because the sandbox's quota is used up. */
export class QuotaError extends CordonError {
  override readonly name = 'QuotaError'
}

/** Per-call options over the sandbox's: objects (limits, env, cgroup, uidPool) merge, the rest replaces. */
function merge(base: RunOptions, over: RunOptions): RunOptions {
  const out: Record<string, unknown> = { ...base, ...over }
  for (const key of ['limits', 'env', 'cgroup', 'uidPool'] as const) {
    if (base[key] && over[key]) out[key] = { ...base[key], ...over[key] }
  }
  return out as RunOptions
}

export class Sandbox {
  private readonly base: RunOptions
  private readonly maxRuns: number | undefined
  private readonly totals: SandboxStats = { runs: 0, violations: {}, cpuMs: 0, wallMs: 0 }
  private started = 0

  constructor({ maxRuns, ...policy }: SandboxOptions = {}) {
    if (maxRuns !== undefined && !(Number.isInteger(maxRuns) && maxRuns >= 0)) {
      throw new CordonError(`maxRuns: must be a whole number >= 0, got ${maxRuns}`)
    }
    this.base = policy
    this.maxRuns = maxRuns
  }

  /** Count a run against the quota before it starts, so concurrent calls cannot overshoot it. */
  private admit(): void {
    if (this.maxRuns !== undefined && this.started >= this.maxRuns) {
      throw new QuotaError(`quota reached: this sandbox allows ${this.maxRuns} runs (maxRuns)`)
    }
    this.started++
  }

  /** Add a finished run to the totals; returns it unchanged. */
  protected record<T extends RunResult>(result: T): T {
    this.totals.runs++
    this.totals.cpuMs += result.cpuMs ?? 0
    this.totals.wallMs += result.wallMs
    if (result.violation) {
      const kind = result.violation.kind
      this.totals.violations[kind] = (this.totals.violations[kind] ?? 0) + 1
    }
    return result
  }

  async run(command: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    this.admit()
    return this.record(await run(command, merge(this.base, options)))
  }

  start(command: readonly string[], options: RunOptions = {}): RunHandle {
    this.admit()
    const handle = start(command, merge(this.base, options))
    const result = handle.result.then((r) => this.record(r))
    return Object.assign(Object.create(handle) as RunHandle, { result })
  }

  async callFunction<T = unknown>(
    module: string | URL,
    exportName: string,
    args: readonly unknown[] = [],
    options: RunOptions = {},
  ): Promise<FunctionResult<T>> {
    this.admit()
    return this.record(await callFunction<T>(module, exportName, args, merge(this.base, options)))
  }

  stats(): SandboxStats {
    return { ...this.totals, violations: { ...this.totals.violations } }
  }
}

export function createSandbox(options: SandboxOptions = {}): Sandbox {
  return new Sandbox(options)
}
