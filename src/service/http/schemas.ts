// The query strings the API takes, as zod schemas: app.ts validates with them, openapi.ts documents them.
import * as z from 'zod'
import { durationSchema } from '../../index.js'

const DEFAULT_LIST_LIMIT = 50
const MAX_LIST_LIMIT = 1000
const DEFAULT_OUTPUT_LIMIT = 1024 * 1024
const MAX_OUTPUT_LIMIT = 8 * 1024 * 1024

const queryInt = (min: number, max: number) => z.coerce.number().int().min(min).max(max)

export const listQuerySchema = z.strictObject({
  state: z.enum(['queued', 'running', 'finished']).optional(),
  status: z.string().min(1).max(64).optional(),
  createdAfter: z.iso.datetime({ offset: true }).optional(),
  /** Only this key's runs (an admin's filter: another key lists its own only). */
  key: z.string().min(1).max(128).optional(),
  limit: queryInt(1, MAX_LIST_LIMIT).default(DEFAULT_LIST_LIMIT),
  cursor: z.string().min(1).max(1024).optional(),
})

export const outputQuerySchema = z.strictObject({
  stream: z.enum(['stdout', 'stderr', 'output']).default('output'),
  offset: queryInt(0, Number.MAX_SAFE_INTEGER).default(0),
  limit: queryInt(1, MAX_OUTPUT_LIMIT).default(DEFAULT_OUTPUT_LIMIT),
})

export const eventsQuerySchema = z.strictObject({
  after: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
  /** Start with the events holding the last this many bytes of output (unless resuming). */
  tail: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
  encoding: z.enum(['utf8', 'base64']).default('utf8'),
})

/**
 * `wait` is a duration (`30s`); the app caps it. `view`: `full` (default), the whole result; `summary`,
 * without stdout, stderr, output, logs and network (as a list shows a run).
 */
export const getQuerySchema = z.strictObject({
  wait: durationSchema.optional(),
  view: z.enum(['full', 'summary']).default('full'),
})
