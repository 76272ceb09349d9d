// The OpenAPI 3.1 document's paths, from the schemas the API validates with. The request body's schema is
// the library's own (via z.toJSONSchema: a few of its fields are refinements zod-to-openapi cannot
// spell, which JSON Schema gives as "any"); the query schemas are app.ts's.
import type { OpenAPIHono } from '@hono/zod-openapi'
import * as z from 'zod'
import { runRequestSchema } from '../request.js'
import { documentRunExtras } from './routes/run-extras-doc.js'
import { eventsQuerySchema, listQuerySchema, outputQuerySchema } from './schemas.js'

const errorSchema = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        field: { type: 'string', description: 'the field at fault, dotted (`options.limits.memory`)' },
      },
      required: ['code', 'message'],
    },
  },
  required: ['error'],
}

const runSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    keyId: { type: 'string', description: 'the key that made it' },
    state: { type: 'string', enum: ['queued', 'running', 'finished'] },
    createdAt: { type: 'string', format: 'date-time' },
    startedAt: { type: ['string', 'null'], format: 'date-time' },
    finishedAt: { type: ['string', 'null'], format: 'date-time' },
    cmd: {
      type: 'array',
      items: { type: 'string' },
      description: 'its command as shown: redacted by the run’s redaction, cut to 1000 characters (…)',
    },
    metadata: { type: 'object', additionalProperties: { type: 'string' } },
    result: { type: 'object', description: "the library's RunResult, once finished" },
  },
  required: ['id', 'keyId', 'state', 'createdAt', 'startedAt', 'finishedAt', 'cmd', 'metadata'],
}

/** A run as a list shows it: its result without stdout, stderr, output, logs and network. */
const runSummarySchema = {
  ...runSchema,
  properties: {
    ...runSchema.properties,
    result: {
      type: 'object',
      description: "the library's RunResult without stdout, stderr, output, logs and network, once finished",
    },
  },
}
/** What a key without runs:read is told of its run: the id to act on it, nothing of the run. */
const runIdSchema = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }

const keySchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string', enum: ['runs:write', 'runs:read', 'admin'] } },
    ceilings: { type: 'object' },
    quota: { type: 'object' },
    secrets: { type: 'array', items: { type: 'string' }, description: 'the names only' },
    retentionMs: { type: ['number', 'null'] },
    createdAt: { type: 'string', format: 'date-time' },
    revokedAt: { type: ['string', 'null'], format: 'date-time' },
  },
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const json = (name: string) => ({ 'application/json': { schema: ref(name) } })
const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((code) => [String(code), { description: 'an error', content: json('Error') }]))
const idParam = z.object({ id: z.string().describe('the run id') })

export function registerOpenApi<E extends object>(app: OpenAPIHono<E & { Variables: object }>): void {
  const r = app.openAPIRegistry
  // Plain JSON Schema (3.1's dialect), which the registry's 3.0-minded types do not describe.
  const raw = (schema: object) => schema as Parameters<typeof r.registerComponent<'schemas'>>[2]
  const { $schema: _, ...request } = z.toJSONSchema(runRequestSchema, { io: 'input', unrepresentable: 'any' })
  r.registerComponent('schemas', 'RunRequest', raw(request))
  r.registerComponent('schemas', 'Run', raw(runSchema))
  r.registerComponent('schemas', 'RunSummary', raw(runSummarySchema))
  r.registerComponent('schemas', 'RunId', raw(runIdSchema))
  r.registerComponent('schemas', 'Key', raw(keySchema))
  r.registerComponent('schemas', 'Error', raw(errorSchema))
  r.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' })
  const security = [{ bearer: [] }]

  r.registerPath({
    method: 'post',
    path: '/v1/runs',
    summary: 'submit a run',
    security,
    request: { body: { required: true, content: json('RunRequest') } },
    responses: {
      201: {
        description: 'accepted (finished already with `wait`); to a key without runs:read, `{ "id" }` only',
        content: { 'application/json': { schema: { oneOf: [ref('Run'), ref('RunId')] } } },
      },
      ...errors(400, 401, 403, 413, 429, 503),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs',
    summary: "list the key's runs (`metadata.<name>=<value>` filters by a label)",
    security,
    request: { query: listQuerySchema },
    responses: {
      200: {
        description: 'a page',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: {
                runs: { type: 'array', items: ref('RunSummary') },
                nextCursor: { type: ['string', 'null'] },
              },
            },
          },
        },
      },
      ...errors(400, 401, 403),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs/{id}',
    summary: 'a run (`?wait=30s`: once finished, or after that long; `?view=summary`: without its output)',
    security,
    request: {
      params: idParam,
      query: z.object({ wait: z.string().optional(), view: z.enum(['full', 'summary']).optional() }),
    },
    responses: {
      200: {
        description: 'the run (`view=summary`: as a list shows it, a RunSummary)',
        content: json('Run'),
      },
      ...errors(400, 401, 403, 404, 429, 503),
    },
  })
  r.registerPath({
    method: 'delete',
    path: '/v1/runs/{id}',
    summary: 'remove a finished run and its output',
    security,
    request: { params: idParam },
    responses: { 204: { description: 'removed' }, ...errors(401, 403, 404, 409) },
  })
  r.registerPath({
    method: 'post',
    path: '/v1/runs/{id}/cancel',
    summary: 'cancel a queued or running run',
    security,
    request: { params: idParam },
    responses: {
      200: { description: 'the run', content: json('Run') },
      202: { description: 'canceled, to a key without runs:read: `{ "id" }` only', content: json('RunId') },
      ...errors(401, 403, 404),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs/{id}/output',
    summary: 'the kept output, as bytes',
    security,
    request: { params: idParam, query: outputQuerySchema },
    responses: {
      200: {
        description: 'bytes',
        content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
      },
      ...errors(400, 401, 403, 404),
    },
  })
  r.registerPath({
    method: 'post',
    path: '/v1/runs/{id}/stdin',
    summary: 'write to a run\'s stdin (`stdin: "open"`)',
    security,
    request: {
      params: idParam,
      body: { content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
    },
    responses: { 204: { description: 'written' }, ...errors(401, 403, 404, 409, 413) },
  })
  r.registerPath({
    method: 'delete',
    path: '/v1/runs/{id}/stdin',
    summary: "close a run's stdin",
    security,
    request: { params: idParam },
    responses: { 204: { description: 'closed' }, ...errors(401, 403, 404, 409) },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs/{id}/events',
    summary: "the run's events as Server-Sent Events (resume with Last-Event-ID or ?after=)",
    security,
    request: { params: idParam, query: eventsQuerySchema },
    responses: {
      200: {
        description: 'an event stream',
        content: { 'text/event-stream': { schema: { type: 'string' } } },
      },
      ...errors(400, 401, 403, 404),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs/{id}/files',
    summary: "the paths of the files the run collected (its request's `collect`)",
    security,
    request: { params: idParam },
    responses: {
      200: {
        description: 'the paths',
        content: {
          'application/json': {
            schema: { type: 'object', properties: { files: { type: 'array', items: { type: 'string' } } } },
          },
        },
      },
      ...errors(401, 403, 404),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs/{id}/files/{path}',
    summary: 'one collected file, as bytes',
    security,
    request: { params: z.object({ id: z.string(), path: z.string().describe('its path in the workspace') }) },
    responses: {
      200: {
        description: 'bytes',
        content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
      },
      ...errors(401, 403, 404),
    },
  })
  r.registerPath({
    method: 'post',
    path: '/v1/keys',
    summary: 'create a key (admin); its secret is shown this once',
    security,
    request: { body: { content: { 'application/json': { schema: { type: 'object' } } } } },
    responses: { 201: { description: 'the key', content: json('Key') }, ...errors(400, 401, 403) },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/keys',
    summary: 'the keys (admin)',
    security,
    responses: {
      200: {
        description: 'the keys',
        content: {
          'application/json': {
            schema: { type: 'object', properties: { keys: { type: 'array', items: ref('Key') } } },
          },
        },
      },
      ...errors(401, 403),
    },
  })
  r.registerPath({
    method: 'delete',
    path: '/v1/keys/{id}',
    summary: 'revoke a key (admin)',
    security,
    request: { params: z.object({ id: z.string() }) },
    responses: { 204: { description: 'revoked' }, ...errors(401, 403, 404) },
  })
  documentRunExtras(r, security)
  for (const [path, summary] of [
    ['/healthz', 'the process is up'],
    ['/readyz', 'it takes runs (503 while draining)'],
    ['/openapi.json', 'this document'],
  ] as const) {
    r.registerPath({ method: 'get', path, summary, responses: { 200: { description: 'ok' } } })
  }
  r.registerPath({
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics (an admin key, unless the server runs with --public-metrics)',
    security,
    responses: { 200: { description: 'ok' }, ...errors(401, 403) },
  })
}
