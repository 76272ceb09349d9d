// What `POST /v1/keys` takes: a key's name, scopes, ceilings, quota, secrets and retention. The ceilings
// are written in the options' own units and validated by the library's own schema pieces (a ceiling of
// `memoryBytes: "256M"` is parsed exactly as the option is), so a ceiling and the value it bounds are
// always comparable numbers. What each ceiling means: ceilings.ts.
import { randomBytes, randomUUID } from 'node:crypto'
import * as z from 'zod'
import { policySchema } from '../index.js'
import { hashKey, newKey } from './keys.js'
import type { KeyRecord, Scope } from './types.js'

const limitsShape = policySchema.shape.limits.unwrap().shape
type LimitName = keyof typeof limitsShape
export const LIMIT_NAMES = Object.keys(limitsShape) as LimitName[]

/** Each limit as the option takes it, without its default: a ceiling left out bounds nothing. */
const limitCeilingsSchema = z.strictObject(
  Object.fromEntries(LIMIT_NAMES.map((name) => [name, limitsShape[name].unwrap().optional()])) as {
    [K in LimitName]: z.ZodOptional<ReturnType<(typeof limitsShape)[K]['unwrap']>>
  },
)

/** The options' environment variable name (the keys of `env`). */
const envName = policySchema.shape.env.unwrap().keyType
/** The options' allowlist object (the third form of `network`). */
const allowlistSchema = policySchema.shape.network
  .unwrap()
  .out.options.find((o): o is Extract<typeof o, z.ZodObject> => o instanceof z.ZodObject)
if (!allowlistSchema) throw new Error('policySchema.network has no allowlist form')

export const NETWORK_MODES = ['none', 'allow', 'host'] as const
export const ISOLATION_TIERS = ['namespace', 'process'] as const

export const ceilingsSchema = z
  .strictObject({
    limits: limitCeilingsSchema
      .optional()
      .describe(
        'the most of each limit a request may ask; a limit it leaves unset gets min(default, ceiling)',
      ),
    network: z
      .union([
        z.enum(['none', 'host']),
        allowlistSchema,
        z.array(z.enum(NETWORK_MODES)).min(1, 'must allow at least one mode'),
      ])
      .optional()
      .describe(
        '"none" (also when unset): no network; "host": any; an allowlist: requests may allow only hosts ' +
          'within it (its deny and its allowLoopback/allowPrivate bound theirs); a list of modes ("none", ' +
          '"allow", "host"): those, an allowlist of public hosts only',
      ),
    isolation: z
      .enum(ISOLATION_TIERS)
      .optional()
      .describe('pins the tier: "auto" runs it, any other tier is refused'),
    rootfs: z
      .array(
        z
          .string()
          .min(1)
          .regex(/^[^/\0]+$/, 'must name a root filesystem, not a path'),
      )
      .optional()
      .describe('the only root filesystems a request may name (a request naming none runs on the host’s)'),
  })
  .default({})

export type Ceilings = z.output<typeof ceilingsSchema>

/** `30d`, `12h`, `90m`, or ms; null keeps runs forever. Longer than durationSchema takes (about 24.8 days). */
const RETENTION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const retentionSchema = z
  .union([z.number().int().positive(), z.string(), z.null()])
  .transform((value, ctx) => {
    if (typeof value !== 'string') return value
    const m = /^(\d+)(ms|s|m|h|d)$/.exec(value.trim())
    const ms = m ? Number(m[1]) * RETENTION_UNITS[m[2]!]! : Number.NaN
    if (!Number.isSafeInteger(ms) || ms <= 0) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a duration such as "30d", "12h" or null, got "${value}"`,
      })
      return z.NEVER
    }
    return ms
  })

const countOrNull = z.number().int().positive().nullable().default(null)

export const SCOPES = ['runs:write', 'runs:read', 'admin'] as const satisfies readonly Scope[]

export const keyCreateSchema = z.strictObject({
  name: z.string().min(1, 'must not be empty').max(200).describe('who or what the key is for'),
  scopes: z
    .array(z.enum(SCOPES))
    .min(1, 'must grant at least one scope')
    .transform((scopes) => [...new Set(scopes)])
    .describe('what the key may do'),
  ceilings: ceilingsSchema.describe('the most a run made with the key may ask'),
  quota: z
    .strictObject({ concurrentRuns: countOrNull, runsPerMinute: countOrNull })
    .default({ concurrentRuns: null, runsPerMinute: null })
    .describe('runs at once and runs started per minute; null: no quota'),
  secrets: z
    .record(
      envName,
      z
        .string()
        .min(1, 'must not be empty')
        .refine((v) => !v.includes('\0'), 'must not contain NUL'),
    )
    .default({})
    .describe(
      'environment variables set in every run of the key, always redacted; requests cannot override them',
    ),
  retention: retentionSchema.default(null).describe('how long finished runs are kept ("30d"); null: forever'),
})

export type KeyCreateRequest = z.input<typeof keyCreateSchema>

/** A new key from a `POST /v1/keys` body (throws the ZodError of an invalid one): the record and, once, the key. */
export function newKeyRecord(body: unknown, now = new Date()): { record: KeyRecord; key: string } {
  const parsed = keyCreateSchema.parse(body)
  const key = newKey()
  const record: KeyRecord = {
    id: `key_${randomUUID().replaceAll('-', '')}`,
    name: parsed.name,
    hash: hashKey(key),
    scopes: parsed.scopes,
    ceilings: parsed.ceilings,
    quota: parsed.quota,
    secrets: parsed.secrets,
    retentionMs: parsed.retention,
    webhookSecret: `whsec_${randomBytes(32).toString('base64url')}`,
    createdAt: now.toISOString(),
    revokedAt: null,
  }
  return { record, key }
}

/** A stored key's ceilings, parsed again (they were stored as parsed, so this only gives them their type). */
export function keyCeilings(key: KeyRecord): Ceilings {
  return ceilingsSchema.parse(key.ceilings)
}
