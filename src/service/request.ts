// What `POST /v1/runs` takes. Its `options` are the library's own schema (policySchema), narrowed to what a
// client may ask for: fields that name host paths or host state are the server's alone (403
// `forbidden-option`, naming the field), and the rest is validated by the very schema run() uses. The
// OpenAPI document is generated from these schemas.
import * as z from 'zod'
import { durationSchema, policySchema } from '../index.js'

/** Options only the server sets (host paths, host state, engine objects): a request naming one is refused. */
export const SERVER_ONLY_OPTIONS = [
  'cwd',
  'writable',
  'readable',
  'hide',
  'passEnv',
  'uidPool',
  'cgroup',
  'spawner',
  'signal',
  'stdin',
  'onLog',
  'onOutput',
  'encoding',
] as const

/**
 * Host paths and host state the operator may set on an in-process service (`cordon mcp --cwd …`): never a
 * request's. The library's own fields and schema, so a bad one is refused as `cordon run` refuses it.
 */
export const hostOptionsSchema = policySchema
  .pick({ cwd: true, writable: true, readable: true, hide: true, passEnv: true, rootfs: true })
  .partial()
  .strict()

export type HostOptions = z.output<typeof hostOptionsSchema>

/** Bounds on what one request may make the server hold (the body itself is capped by the HTTP layer). */
export const REQUEST_BOUNDS = {
  args: 10_000,
  argBytes: 1024 * 1024,
  files: 1000,
  collect: 100,
  metadata: 32,
  redact: 64,
  redactChars: 16 * 1024,
  env: 256,
  envBytes: 32 * 1024,
}

/** The options a request may carry: the library's fields, as the library validates them. */
export const apiOptionsSchema = policySchema
  .pick({
    limits: true,
    env: true,
    network: true,
    allow: true,
    deny: true,
    isolation: true,
    redact: true,
    clock: true,
    mergeOutput: true,
    denySyscalls: true,
    rootfs: true,
  })
  .partial()
  .superRefine((options, ctx) => {
    // The engine builds each run's redaction (an automaton over every redact string and every value of a
    // variable whose name looks secret) in this process, at hundreds of bytes a character: bounded here,
    // as the body is, since 8 MiB of them ran the server's heap out.
    const redact = options.redact ?? []
    const redactChars = redact.reduce((n, r) => n + (typeof r === 'string' ? r.length : 0), 0)
    if (redact.length > REQUEST_BOUNDS.redact || redactChars > REQUEST_BOUNDS.redactChars)
      ctx.addIssue({
        code: 'custom',
        path: ['redact'],
        message: `must have at most ${REQUEST_BOUNDS.redact} strings, ${REQUEST_BOUNDS.redactChars} characters in all`,
      })
    const env = Object.entries(options.env ?? {})
    const envBytes = env.reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v) + 2, 0)
    if (env.length > REQUEST_BOUNDS.env || envBytes > REQUEST_BOUNDS.envBytes)
      ctx.addIssue({
        code: 'custom',
        path: ['env'],
        message: `must have at most ${REQUEST_BOUNDS.env} variables, ${REQUEST_BOUNDS.envBytes} bytes in all`,
      })
    // A root filesystem by name only: a path is host state.
    if (typeof options.rootfs === 'string' && options.rootfs.includes('/')) {
      ctx.addIssue({ code: 'custom', path: ['rootfs'], message: 'must name a root filesystem, not a path' })
    }
  })

/** A path inside the run's workspace: relative, no `..`, no NUL; symlinks are judged when it is written. */
const workspacePath = z
  .string()
  .min(1, 'must not be empty')
  .max(4096, 'must be at most 4096 characters')
  .refine((p) => !p.includes('\0'), 'must not contain NUL')
  .refine((p) => !p.startsWith('/'), 'must be relative to the workspace')
  .refine((p) => !p.split('/').includes('..'), 'must not contain ..')

export const runRequestSchema = z.strictObject({
  cmd: z
    .array(z.string().refine((a) => !a.includes('\0'), 'must not contain NUL'))
    .min(1, 'must name a program')
    .max(REQUEST_BOUNDS.args, `must have at most ${REQUEST_BOUNDS.args} arguments`)
    .refine(
      (args) => args.reduce((n, a) => n + Buffer.byteLength(a) + 1, 0) <= REQUEST_BOUNDS.argBytes,
      `must be at most ${REQUEST_BOUNDS.argBytes} bytes in all`,
    )
    .describe('the program and its arguments (an argv array, never a shell string)'),
  stdin: z
    .union([z.string(), z.strictObject({ base64: z.base64() }), z.literal('open')])
    .optional()
    .describe('what the program reads: text, bytes as base64, or "open" to write it later (POST …/stdin)'),
  files: z
    .array(
      z.strictObject({
        path: workspacePath,
        content: z.string(),
        encoding: z.enum(['utf8', 'base64']).default('utf8'),
        mode: z.number().int().min(0).max(0o777).optional(),
      }),
    )
    .max(REQUEST_BOUNDS.files)
    .default([])
    .describe('files written into the run’s fresh workspace (its cwd, and its one writable path) first'),
  collect: z
    .array(workspacePath)
    .max(REQUEST_BOUNDS.collect)
    .default([])
    .describe('workspace paths (globs) kept after the run, readable at /v1/runs/{id}/files/{path}'),
  options: apiOptionsSchema.prefault({}).describe('the library’s run options a client may set'),
  metadata: z
    .record(z.string().max(64), z.string().max(1024))
    .refine((m) => Object.keys(m).length <= REQUEST_BOUNDS.metadata, 'must have at most 32 entries')
    .default({})
    .describe('labels kept with the run, to filter lists by'),
  webhook: z
    .strictObject({ url: z.url({ protocol: /^https?$/ }) })
    .optional()
    .describe('POSTed the finished run, signed with the key’s webhookSecret'),
  wait: durationSchema
    .optional()
    .describe('answer once the run finished, or after this long (capped by the server)'),
})

export type RunRequest = z.output<typeof runRequestSchema>
