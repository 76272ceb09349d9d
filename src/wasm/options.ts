// The WASM face's options: one zod schema for the library, the CLI's flags (`cliRegistry`, walked by
// cli/wasm.ts as cli/flags.ts walks the run options) and docs/wasm.md. `exec.options` is a whole RunOptions,
// validated by the engine's own schema: what every command the guest starts runs under.
import * as z from 'zod'
import { PolicyError } from '../errors.js'
import {
  cliRegistry,
  durationSchema,
  type LogEntry,
  type OutputChunk,
  policySchema,
  type RunOptions,
  sizeSchema,
} from '../index.js'
import type { ClockSpec } from './clock.js'
import { PAGE } from './module.js'
import type { ExecRecord } from './result.js'

/** The seed's deterministic timestamp in its own test: a virtual clock starts here unless told otherwise. */
export const DEFAULT_CLOCK_START = 1_700_000_000_000
/** wasm32's whole address space. */
const MAX_WASM_MEMORY = 65536 * PAGE
const MAX_STEP_MS = 86_400_000

const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
  .refine((name) => name !== '__proto__', 'cannot be __proto__')
const noNul = z.string().refine((v) => !v.includes('\0'), 'must not contain NUL')

/** `2s`, `250ms`, `7` (ms): a step of the virtual clock, 0 allowed. */
function stepMs(text: string): number | string {
  const m = /^(\d+)(ms|s)?$/.exec(text.trim())
  if (!m) return text
  return Number(m[1]) * (m[2] === 's' ? 1000 : 1)
}

/**
 * The CLI's spelling: `real`, `fixed:T` (a virtual clock at T, ms since the epoch or an ISO time, that
 * does not move: the seed's deterministic mode), `step:MS` (moving MS a read), or both, `fixed:T,step:MS`.
 */
function parseClockFlag(value: unknown, ctx: z.core.$RefinementCtx): unknown {
  if (typeof value !== 'string' || value === 'real') return value
  const out: Record<string, unknown> = {}
  for (const part of value.split(',').map((s) => s.trim())) {
    const [key, ...rest] = part.split(':')
    const arg = rest.join(':')
    if (key === 'fixed' && arg) out.start = /^\d+$/.test(arg) ? Number(arg) : arg
    else if (key === 'step' && arg) out.stepMs = stepMs(arg)
    else
      ctx.addIssue({
        code: 'custom',
        input: value,
        message: `must be real, fixed:T, step:MS or fixed:T,step:MS, got "${value}"`,
      })
  }
  return out
}

const virtualClockSchema = z.strictObject({
  start: z
    .union([
      z.number().int().min(0).max(8.64e15),
      z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time, e.g. 2024-01-01T00:00:00Z' }),
    ])
    .default(DEFAULT_CLOCK_START)
    .describe('the first time the guest reads: ms since the epoch, or an ISO date-time'),
  stepMs: z
    .number()
    .int()
    .min(0)
    .max(MAX_STEP_MS)
    .default(0)
    .describe("how far each read moves the clock on (0: it stands still, as the seed's deterministic mode)"),
  execAdvanceMs: z
    .number()
    .int()
    .min(0)
    .max(MAX_STEP_MS)
    .optional()
    .describe('how far each exec moves it on, and the duration_ms the guest is told (default: stepMs)'),
  seed: z.number().int().default(0).describe('seed of the random bytes WASI random_get gives'),
})

export const wasmLimitsSchema = z.strictObject({
  wallTimeMs: durationSchema.default(30_000).register(cliRegistry, {
    flag: 'wasm-timeout',
    arg: 'DURATION',
    description: "the guest's wall-clock limit, its execs included",
  }),
  cpuTimeMs: durationSchema.default(30_000).register(cliRegistry, {
    flag: 'wasm-cpu-time',
    arg: 'DURATION',
    description: "the guest's CPU-time limit (its own thread or sandbox; not its execs)",
  }),
  memoryBytes: sizeSchema
    .refine((n) => n >= PAGE && n <= MAX_WASM_MEMORY, `must be from 64K to 4G (a wasm32 memory)`)
    .default(256 * 1024 * 1024)
    .register(cliRegistry, {
      flag: 'wasm-memory',
      arg: 'SIZE',
      description: "the most linear memory the guest may have (its module's maximum is rewritten to it)",
    }),
  maxOutputBytes: sizeSchema.default(1024 * 1024).register(cliRegistry, {
    flag: 'wasm-max-output',
    arg: 'SIZE',
    description: 'bytes kept of what the guest writes to stdout and stderr together; past it, it is stopped',
  }),
  maxLogBytes: sizeSchema.default(256 * 1024).register(cliRegistry, {
    flag: 'wasm-max-log',
    arg: 'SIZE',
    description: "bytes kept of the guest's log lines; later ones are dropped",
  }),
  maxHostCalls: z.number().int().positive().max(1e9).default(1_000_000).register(cliRegistry, {
    flag: 'max-host-calls',
    arg: 'N',
    description: 'calls of imports the guest may make in all; past them, it is stopped',
  }),
})

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

export const execSchema = z.strictObject({
  maxExecs: z.number().int().min(0).max(1_000_000).default(0).register(cliRegistry, {
    flag: 'max-execs',
    arg: 'N',
    description: 'commands the guest may run, each a cordon sandbox under the run flags (default 0: none)',
  }),
  envAllow: z.array(envName).default([]).register(cliRegistry, {
    flag: 'exec-env',
    arg: 'NAME',
    description: "a variable a guest's request may set in its command (repeatable; default: none)",
  }),
  outputOverflow: z.enum(['truncate', 'error']).default('truncate').register(cliRegistry, {
    flag: 'output-overflow',
    arg: 'truncate|error',
    description: "an exec stopped at its output cap: its output cut there, or the seed's OutputTooLarge",
  }),
  onQuota: z.enum(['error', 'stop']).default('error').register(cliRegistry, {
    flag: 'on-quota',
    arg: 'error|stop',
    description: 'an exec past --max-execs: an error the guest is told, or the guest stopped (process-limit)',
  }),
  options: z
    .custom<ExecRunOptions>((v) => isObject(v), 'must be an object of run options')
    .default({})
    .describe('the run options (limits, allow, network…) every exec runs under; the CLI: the run flags'),
})

/** What each exec runs under: run()'s options but those each request or the face sets itself. */
export type ExecRunOptions = Omit<RunOptions, 'stdin' | 'encoding' | 'onOutput'>
/** Set per exec, not by the caller: stdin from the request, output as bytes (the guest gets them exact). */
const PER_EXEC = ['stdin', 'encoding', 'onOutput'] as const

type Fn<T> = (value: T) => void
const callback = <T>(what: string) =>
  z
    .custom<Fn<T>>((v) => typeof v === 'function', 'must be a function')
    .optional()
    .describe(what)

export const wasmOptionsSchema = z.strictObject({
  invoke: z.string().min(1).optional().register(cliRegistry, {
    flag: 'invoke',
    arg: 'EXPORT',
    description: 'the export to call (default: _start, a WASI command)',
  }),
  args: z
    .array(z.union([z.number(), z.bigint(), z.string()]))
    .default([])
    .register(cliRegistry, {
      flag: 'arg',
      arg: 'VALUE',
      description: 'an argument of the export (repeatable)',
    }),
  argv: z
    .array(noNul)
    .optional()
    .describe("WASI's args (default: the module's file name); the CLI: the words after --"),
  environ: z.record(envName, noNul).default({}).register(cliRegistry, {
    flag: 'wasi-env',
    arg: 'K=V',
    description: "a variable of the guest's WASI environment (repeatable)",
  }),
  isolation: z.enum(['worker', 'sandbox']).default('worker').register(cliRegistry, {
    flag: 'wasm-isolation',
    arg: 'worker|sandbox',
    description: 'where the guest runs: a worker thread, or a cordon sandbox of its own (a node process)',
  }),
  memoryExport: z.string().min(1).default('memory').register(cliRegistry, {
    flag: 'memory-export',
    arg: 'NAME',
    description: "the export holding the guest's memory, where pointers point",
  }),
  limits: wasmLimitsSchema.prefault({}),
  clock: z
    .preprocess(
      parseClockFlag,
      z.union([z.literal('real'), virtualClockSchema], {
        error: 'must be "real" or a virtual clock { start, stepMs }',
      }),
    )
    .default('real')
    .register(cliRegistry, {
      flag: 'clock',
      arg: 'real|fixed:T|step:MS',
      description:
        "the guest's clock: the host's, or virtual from T (ms or ISO), moving MS a read and an exec",
    }),
  exec: execSchema.prefault({}),
  signal: z
    .custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal')
    .optional()
    .describe('aborting it stops the guest (status canceled)'),
  onLog: callback<LogEntry>('called with each log entry of the guest as it comes'),
  onOutput: callback<OutputChunk>("called with each chunk the guest writes to WASI's stdout or stderr"),
  onExec: callback<ExecRecord>('called with each exec as it ends'),
})

/** What callers pass: every field optional, sizes and durations as numbers or strings. */
export type WasmOptions = z.input<typeof wasmOptionsSchema>
export type WasmPolicy = z.output<typeof wasmOptionsSchema>

function toPolicyError(error: z.ZodError, prefix = ''): PolicyError {
  const issue = error.issues[0]!
  const path = issue.path.map(String)
  if (issue.code === 'unrecognized_keys') path.push(issue.keys[0]!)
  const field = [prefix, ...path].filter(Boolean).join('.')
  const got = 'input' in issue && issue.input !== undefined && !/\bgot\b/.test(issue.message)
  const reason = issue.code === 'unrecognized_keys' ? 'unknown option' : issue.message
  return new PolicyError(field, got ? `${reason}, got ${shown(issue.input)}` : reason)
}

function shown(value: unknown): string {
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'bigint') return `${value}n`
  try {
    const text = JSON.stringify(value)
    if (text !== undefined) return text.length > 60 ? `${text.slice(0, 57)}...` : text
  } catch {
    // circular
  }
  return Object.prototype.toString.call(value)
}

const PARSE = { reportInput: true, jitless: true } as const

/** The options parsed (PolicyError naming the field), the execs' run options checked by run()'s own schema. */
export function parseWasmOptions(options: unknown): WasmPolicy {
  const parsed = wasmOptionsSchema.safeParse(options ?? {}, PARSE)
  if (!parsed.success) throw toPolicyError(parsed.error)
  for (const key of PER_EXEC)
    if (Object.hasOwn(parsed.data.exec.options, key))
      throw new PolicyError(`exec.options.${key}`, 'is set by each exec, not by the options')
  const exec = policySchema.safeParse(parsed.data.exec.options, PARSE)
  if (!exec.success) throw toPolicyError(exec.error, 'exec.options')
  return parsed.data
}

/** The parsed clock as the runtime keeps it. */
export function clockSpec(clock: WasmPolicy['clock']): ClockSpec {
  if (clock === 'real') return { mode: 'real' }
  const startMs = typeof clock.start === 'number' ? clock.start : Date.parse(clock.start)
  return {
    mode: 'virtual',
    startMs,
    stepMs: clock.stepMs,
    execAdvanceMs: clock.execAdvanceMs ?? clock.stepMs,
    seed: clock.seed,
  }
}

/**
 * The registry this schema's fields are in, for the CLI: it loads this module apart from its bundle, where
 * the engine's registry is another copy.
 */
export const wasmFlagRegistry = cliRegistry
