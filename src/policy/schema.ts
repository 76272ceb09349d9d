// The one policy schema: library options, CLI flags (via the `cli` registry), and docs all come from here.
import os from 'node:os'
import { Readable } from 'node:stream'
import * as z from 'zod'
import { PolicyError } from '../errors.js'
import { isSyscallName } from '../host/syscalls.js'
import { uidPoolSchema } from '../host/uid-pool.js'
import { networkAllowSchema } from '../net/policy.js'
import { Spawner } from '../spawner/spawner.js'
import { compileRedactPattern } from './redact-pattern.js'
import { parseDuration, parseSize } from './units.js'

export interface CliMeta {
  /** Long flag name without dashes. */
  flag: string
  /** Placeholder shown in help; absent for boolean flags. */
  arg?: string
  description: string
}

/** Maps schema fields to CLI flags; the CLI builds its options by walking this. */
export const cli = z.registry<CliMeta>()

/** `max`: the largest value the kernel or Node can take as given (beyond it they wrap or fire at once). */
function withUnits(parse: (text: string) => number, what: string, max: number) {
  return z.union([z.number(), z.string()]).transform((value, ctx) => {
    let n: number
    try {
      n = typeof value === 'number' ? value : parse(value)
    } catch (error) {
      ctx.issues.push({ code: 'custom', input: value, message: (error as Error).message })
      return z.NEVER
    }
    if (!Number.isFinite(n) || n <= 0 || !Number.isInteger(n)) {
      ctx.issues.push({
        code: 'custom',
        input: value,
        message: `must be a positive whole ${what}, got ${value}`,
      })
      return z.NEVER
    }
    if (n > max) {
      ctx.issues.push({ code: 'custom', input: value, message: `must be at most ${max}, got ${value}` })
      return z.NEVER
    }
    return n
  })
}

/** setTimeout's limit (about 24.8 days); longer ones fire at once. */
const MAX_DURATION_MS = 2 ** 31 - 1
/** A duration as the options take one (ms, or a string with its unit: `500ms`, `20s`), for the faces' own fields. */
export const durationSchema = withUnits(parseDuration, 'number of milliseconds', MAX_DURATION_MS)
/** A size as the options take one (bytes, or a string with its unit: `64K`, `256M`), for the faces' own fields. */
export const sizeSchema = withUnits(parseSize, 'number of bytes', Number.MAX_SAFE_INTEGER)
// One schema each, shared by every field (a schema is immutable; each field's default wraps it): every
// CLI start builds the policy schema, and a union with its transform is ~10 zod objects to build.
const duration = () => durationSchema
const size = () => sizeSchema
const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
  // A plain object's __proto__ is its prototype, not a key: the variable would vanish without a word.
  .refine((name) => name !== '__proto__', 'cannot be __proto__')
const nonEmpty = z
  .string()
  .min(1, 'must not be empty')
  .refine((s) => !s.includes('\0'), 'must not contain NUL')

export const MiB = 1024 * 1024
const MIN_OPEN_FILES = 16
const MAX_OPEN_FILES = 2 ** 20
const MAX_PROCESSES = 4_194_304

export const limitsSchema = z.strictObject({
  wallTimeMs: duration().default(30_000).register(cli, {
    flag: 'timeout',
    arg: 'DURATION',
    description: 'wall-clock limit (e.g. 500ms, 2s, 1m)',
  }),
  cpuTimeMs: duration()
    .default(30_000)
    .register(cli, { flag: 'cpu-time', arg: 'DURATION', description: 'CPU-time limit' }),
  memoryBytes: size()
    .default(512 * MiB)
    .register(cli, { flag: 'memory', arg: 'SIZE', description: 'memory limit (e.g. 64K, 256M, 1G)' }),
  maxProcesses: z
    .number()
    .int()
    .positive()
    // The kernel's PID_MAX_LIMIT: pids.max refuses more.
    .max(MAX_PROCESSES, `must be at most ${MAX_PROCESSES} (the kernel's PID_MAX_LIMIT)`)
    .default(64)
    .register(cli, { flag: 'max-procs', arg: 'N', description: 'most processes alive at once' }),
  // Per process (RLIMIT_NOFILE, soft = hard): no cgroup counts open files. 16 is what bubblewrap needs for
  // its own set-up; 2^20 is the kernel's default fs.nr_open, past which setrlimit fails.
  maxOpenFiles: z
    .number()
    .int()
    .min(MIN_OPEN_FILES, `must be at least ${MIN_OPEN_FILES} (the sandbox's own set-up needs that many)`)
    .max(MAX_OPEN_FILES, `must be at most ${MAX_OPEN_FILES} (the kernel's default fs.nr_open)`)
    .default(1024)
    .register(cli, {
      flag: 'max-open-files',
      arg: 'N',
      description: 'most files each process may have open (RLIMIT_NOFILE)',
    }),
  maxFileSizeBytes: size()
    .default(256 * MiB)
    .register(cli, { flag: 'max-file-size', arg: 'SIZE', description: 'largest file the sandbox may write' }),
  maxOutputBytes: size()
    .default(1 * MiB)
    .register(cli, {
      flag: 'max-output',
      arg: 'SIZE',
      description: 'bytes kept from stdout and stderr together',
    }),
  tmpfsBytes: size()
    .default(64 * MiB)
    .register(cli, {
      flag: 'tmp-size',
      arg: 'SIZE',
      description: 'size of the private /tmp (and of every tmpfs)',
    }),
  maxLogBytes: size()
    .default(256 * 1024)
    .register(cli, {
      flag: 'max-log',
      arg: 'SIZE',
      description:
        'bytes read from the log channel (CORDON_LOG_FD), and kept of it as entries (each its JSON line)',
    }),
  killGraceMs: duration()
    .default(1000)
    .register(cli, { flag: 'kill-grace', arg: 'DURATION', description: 'time between SIGTERM and SIGKILL' }),
})

/** How output reaches the caller: 'utf8' text (the default) or the program's bytes as they are ('buffer'). */
export type Encoding = 'utf8' | 'buffer'
/** What output is made of: a string, or a Buffer with `encoding: 'buffer'`. */
export type OutputData = string | Buffer

export interface OutputChunk<D extends OutputData = string> {
  stream: 'stdout' | 'stderr'
  /**
   * Decoded text (a multi-byte character split across reads arrives whole in the later chunk), or with
   * `encoding: 'buffer'` the bytes as read.
   */
  data: D
  /** Bytes of this chunk that were kept (counted against maxOutputBytes). */
  bytes: number
}

/** One line from the sandbox's log channel. Malformed lines arrive as `{ level: 'info', msg: <the line> }`. */
export interface LogEntry {
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error'
  msg: string
  /** Every other field of the line's JSON object. */
  [field: string]: unknown
}

const isReadable = (v: unknown): v is Readable => v instanceof Readable
const stdinSchema = z.union([z.string(), z.instanceof(Buffer), z.custom<Readable>(isReadable)], {
  error: 'must be a string, a Buffer or a Readable',
})

export const cgroupSchema = z.strictObject({
  mode: z
    .enum(['auto', 'off'])
    .default('auto')
    .describe(
      "'auto': a cgroup per sandbox where this machine offers one; 'off' leaves memory, CPU time and processes to per-process rlimits",
    ),
  parent: z
    .string()
    .startsWith('/', 'must be a path inside the cgroup hierarchy, starting with /')
    .optional()
    .describe('path inside the cgroup hierarchy to create sandboxes under; default: the one cordon runs in'),
})

const NETWORK_OPTIONS = {
  '+loopback': 'allowLoopback',
  '+private': 'allowPrivate',
  '+metadata': 'allowMetadata',
} as const

/**
 * `allow:pypi.org,*.pythonhosted.org,!evil.pythonhosted.org,+loopback,+private` (the CLI's --net form). A
 * token it does not know (`+lopback`, a bare `!`) is an error naming it, never dropped.
 */
function parseNetworkFlag(value: unknown, ctx: z.core.$RefinementCtx): unknown {
  if (typeof value !== 'string' || !value.startsWith('allow:')) return value
  const items = value
    .slice('allow:'.length)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const parsed = {
    allow: [] as string[],
    deny: [] as string[],
    allowLoopback: false,
    allowPrivate: false,
    allowMetadata: false,
  }
  for (const item of items) {
    if (item.startsWith('+')) {
      const option = NETWORK_OPTIONS[item as keyof typeof NETWORK_OPTIONS]
      if (option) parsed[option] = true
      else
        ctx.addIssue({
          code: 'custom',
          input: value,
          message: `unknown option "${item}" (the options are ${Object.keys(NETWORK_OPTIONS).join(', ')})`,
        })
    } else if (item.startsWith('!')) {
      if (item.length === 1)
        ctx.addIssue({ code: 'custom', input: value, message: '"!" names no host to deny' })
      parsed.deny.push(item.slice(1))
    } else {
      parsed.allow.push(item)
    }
  }
  return parsed
}

/** What `network` takes: "none", "host", the CLI's `allow:…` form, or an allowlist object. */
type NetworkInput = 'none' | 'host' | `allow:${string}` | z.input<typeof networkAllowSchema>

export const policySchema = z.strictObject({
  limits: limitsSchema.prefault({}),
  env: z
    .record(
      envName,
      z.string().refine((v) => !v.includes('\0'), 'must not contain NUL'),
    )
    .default({})
    .register(cli, { flag: 'env', arg: 'K=V', description: 'set a variable in the sandbox (repeatable)' }),
  passEnv: z.array(envName).default([]).register(cli, {
    flag: 'pass-env',
    arg: 'K',
    description: "pass one of cordon's variables through (repeatable)",
  }),
  cwd: nonEmpty
    .optional()
    .register(cli, { flag: 'cwd', arg: 'DIR', description: 'working directory (must exist)' }),
  writable: z
    .array(nonEmpty)
    .default([])
    .register(cli, { flag: 'writable', arg: 'PATH', description: 'make a host path writable (repeatable)' }),
  readable: z.array(nonEmpty).optional().register(cli, {
    flag: 'readable',
    arg: 'PATH',
    description: 'strict mode: only system directories and these paths are visible (repeatable)',
  }),
  rootfs: nonEmpty.optional().register(cli, {
    flag: 'rootfs',
    arg: 'NAME|DIR',
    description:
      'run on another root filesystem (read-only): a name from `cordon rootfs create`, or a directory',
  }),
  // Left undefined when not given (see defaultHide): only a list the caller gave is refused by a tier
  // that cannot hide.
  hide: z.array(nonEmpty).optional().register(cli, {
    flag: 'hide',
    arg: 'PATH',
    description:
      "hide a path: a directory shows empty, a file as /dev/null (repeatable; default: cordon's home)",
  }),
  network: z
    .preprocess(
      // Typed as what it takes, so that RunOptions' `network` (and a client's) is no `unknown`.
      (value: NetworkInput, ctx) => parseNetworkFlag(value, ctx),
      z.union([z.enum(['none', 'host']), networkAllowSchema], {
        error:
          'must be "none", "host" or an allowlist { allow, deny, allowLoopback, allowPrivate, allowMetadata }',
      }),
    )
    .default('none')
    .register(cli, {
      flag: 'net',
      arg: 'none|host|allow:HOST[:PORT],...',
      description: "network access; allow: goes through cordon's proxy (!HOST denies, +loopback, +private)",
    }),
  allow: z.array(nonEmpty).default([]).register(cli, {
    flag: 'allow',
    arg: 'CMD',
    description: 'only these commands may be launched (repeatable)',
  }),
  deny: z.array(nonEmpty).default([]).register(cli, {
    flag: 'deny',
    arg: 'CMD',
    description: 'these commands may not be launched (repeatable)',
  }),
  isolation: z
    .enum(['auto', 'namespace', 'process'])
    .default('auto')
    .register(cli, { flag: 'isolation', arg: 'auto|namespace|process', description: 'isolation tier' }),
  stdin: stdinSchema
    .optional()
    .describe('what the program reads: a string, a Buffer or a Readable (piped as it is read); unset: EOF'),
  signal: z
    .custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal')
    .optional()
    .describe('aborting it cancels the run (status canceled)'),
  spawner: z
    .custom<Spawner | false>(
      (v) => v === false || v instanceof Spawner,
      'must be a Spawner from openSpawner(), or false',
    )
    .optional()
    .describe(
      "start the sandbox through this spawner (see openSpawner); unset: the library's default spawner once it is open, false: fork the host",
    ),
  redact: z
    .array(
      z.union(
        [
          z.string().min(1, 'must not be empty'),
          // Matched by RE2 in linear time; what it cannot run that way is refused, not run by V8.
          z.instanceof(RegExp).superRefine((re, ctx) => {
            try {
              compileRedactPattern(re)
            } catch (error) {
              ctx.addIssue({ code: 'custom', message: (error as Error).message })
            }
          }),
        ],
        { error: 'must be a string or a RegExp' },
      ),
    )
    .default([])
    .register(cli, {
      flag: 'redact',
      arg: 'TEXT',
      description: 'show this text as [REDACTED] in all output (repeatable)',
    }),
  clock: z
    .strictObject({
      start: z.iso
        .datetime({ offset: true, message: 'must be an ISO 8601 date-time, e.g. 2024-01-01T00:00:00Z' })
        .register(cli, {
          flag: 'clock',
          arg: 'ISO-TIME',
          description: 'the sandbox sees this wall-clock time at start, moving on from there (libfaketime)',
        }),
    })
    .optional(),
  onLog: z
    .custom<(entry: LogEntry) => void>((v) => typeof v === 'function', 'must be a function')
    .optional()
    .describe('called with each log entry as it arrives'),
  onOutput: z
    .custom<(chunk: OutputChunk<OutputData>) => void>((v) => typeof v === 'function', 'must be a function')
    .optional()
    .describe('called with each output chunk ({ stream, data, bytes }) as it arrives'),
  mergeOutput: z.boolean().default(false).register(cli, {
    flag: 'merge-output',
    description:
      'one pipe as both stdout and stderr (2>&1): output in the exact order written, all of it on stdout',
  }),
  encoding: z
    .enum(['utf8', 'buffer'])
    .default('utf8')
    .describe(
      "'utf8': stdout, stderr, output and each chunk's data are strings, decoded per stream; 'buffer': " +
        "Buffers holding the program's bytes exactly (secrets are matched as their UTF-8 bytes)",
    ),
  denySyscalls: z
    .array(z.string().refine(isSyscallName, 'is not a known system call'))
    .default([])
    .register(cli, {
      flag: 'deny-syscall',
      arg: 'NAME',
      description: 'refuse one more system call with EPERM (repeatable)',
    }),
  uidPool: uidPoolSchema.prefault({}),
  cgroup: cgroupSchema.prefault({}),
})

/** `encoding` as it decides the type of output: Buffers only for 'buffer', text unless it is given. */
type EncodingOption<D extends OutputData> = [D] extends [Buffer]
  ? { encoding: 'buffer' }
  : [D] extends [string]
    ? { encoding?: 'utf8' }
    : { encoding?: Encoding }

/**
 * What callers pass: every field optional, sizes and durations as numbers or strings. `D` is what output
 * arrives as: `RunOptions<Buffer>` requires `encoding: 'buffer'`, and its onOutput gets Buffer chunks.
 * (`RunOptions<string | Buffer>`, an encoding known only at run time, is for the engine's own use: run()
 * and start() take one of the two, so that the result's type is known.)
 */
export type RunOptions<D extends OutputData = string> = Omit<
  z.input<typeof policySchema>,
  'encoding' | 'onOutput'
> &
  EncodingOption<D> & { onOutput?: (chunk: OutputChunk<D>) => void }

/** Options of any encoding, as the engine takes them (it parses them, and the encoding decides the rest). */
export type AnyRunOptions = RunOptions | RunOptions<Buffer> | RunOptions<OutputData>
export type Limits = z.output<typeof limitsSchema>
export type Policy = z.output<typeof policySchema>

// The program must be named; its arguments may be empty strings (`node -e ''`) but never hold NUL.
export const commandSchema = z
  .array(z.string().refine((a) => !a.includes('\0'), 'must not contain NUL'))
  .min(1, 'must name a program')
  .refine((argv) => argv[0] !== '', { message: 'must not be empty', path: [0] })

/** A value as an error message quotes it: JSON where it can, cut short. */
function shown(value: unknown): string {
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'bigint') return `${value}n`
  if (value instanceof RegExp) return String(value)
  try {
    const text = JSON.stringify(value)
    if (text !== undefined) return text.length > 60 ? `${text.slice(0, 57)}...` : text
  } catch {
    // circular: named by its kind below
  }
  return Object.prototype.toString.call(value)
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
  record: 'an object',
}

/** What was wrong, in words that name what is accepted and the value given (zod's own say "Invalid input"). */
function reason(issue: z.core.$ZodIssue): string {
  const got = 'input' in issue ? `, got ${shown(issue.input)}` : ''
  if (issue.code === 'unrecognized_keys') return 'unknown option'
  // Our own messages (units, names, NUL, unions) say what is accepted and may quote the value already.
  if (!/^(Invalid|Too (small|big)|Expected)/.test(issue.message))
    return /\bgot\b/.test(issue.message) ? issue.message : `${issue.message}${got}`
  switch (issue.code) {
    case 'invalid_key':
      return issue.issues[0] ? reason(issue.issues[0]) : `is not a valid key${got}`
    case 'invalid_type':
      return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}${got}`
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}${got}`
    case 'too_small':
      return `must be ${issue.inclusive ? 'at least' : 'more than'} ${issue.minimum}${got}`
    case 'too_big':
      return `must be ${issue.inclusive ? 'at most' : 'less than'} ${issue.maximum}${got}`
    default:
      return `${issue.message}${got}`
  }
}

function toPolicyError(error: z.ZodError, prefix = ''): PolicyError {
  const issue = error.issues[0]!
  const path = [...issue.path.map(String)]
  if (issue.code === 'unrecognized_keys') path.push(issue.keys[0]!)
  const field = [prefix, ...path].filter(Boolean).join('.')
  return new PolicyError(field, reason(issue))
}

/** What the namespace tier hides when the policy names nothing: cordon's home. */
export const defaultHide = (): string[] => [os.homedir()]

// jitless: zod's fast path compiles a parser per object schema with `new Function` at its first parse,
// which a CLI start pays (~1.5 ms on Node 24) and no code cache keeps; parsing without it was no slower
// warm either (10 µs against 12–24 µs for a typical policy).
const PARSE = { reportInput: true, jitless: true } as const

export function parsePolicy(options: unknown): Policy {
  const parsed = policySchema.safeParse(options ?? {}, PARSE)
  if (!parsed.success) throw toPolicyError(parsed.error)
  return parsed.data
}

export function parseCommand(command: unknown): string[] {
  const parsed = commandSchema.safeParse(command, PARSE)
  if (!parsed.success) throw toPolicyError(parsed.error, 'command')
  return parsed.data
}
