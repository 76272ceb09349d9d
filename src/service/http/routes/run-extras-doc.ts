// The OpenAPI paths of the dashboard's routes (run-extras.ts), registered with the API's own.
import type { OpenAPIHono } from '@hono/zod-openapi'
import * as z from 'zod'

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const errors = (...codes: number[]) =>
  Object.fromEntries(
    codes.map((code) => [
      String(code),
      { description: 'an error', content: { 'application/json': { schema: ref('Error') } } },
    ]),
  )
const idParam = z.object({ id: z.string().describe('the run id') })
const object = (description: string) => ({
  description,
  content: { 'application/json': { schema: { type: 'object' as const } } },
})

type Registry = OpenAPIHono['openAPIRegistry']

export function documentRunExtras(r: Registry, security: { bearer: never[] }[]): void {
  r.registerPath({
    method: 'get',
    path: '/v1/runs/events',
    summary:
      'the runs’ state changes as Server-Sent Events: `run` (its summary), `removed` (`{ id }`), `sync` (list again); resume with Last-Event-ID',
    security,
    responses: {
      200: {
        description: 'an event stream',
        content: { 'text/event-stream': { schema: { type: 'string' } } },
      },
      ...errors(400, 401, 403, 429),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/runs/{id}/request',
    summary:
      'its request as its page shows it: the limits in force, names, sizes; never a value of env, a redact string or a file',
    security,
    request: { params: idParam },
    responses: { 200: object('the request, shown'), ...errors(401, 403, 404) },
  })
  r.registerPath({
    method: 'post',
    path: '/v1/runs/{id}/rerun',
    summary: 'a new run of the same stored request (only by the key that made it)',
    security,
    request: { params: idParam },
    responses: {
      201: {
        description: 'the new run; to a key without runs:read, `{ "id" }` only',
        content: { 'application/json': { schema: { oneOf: [ref('RunSummary'), ref('RunId')] } } },
      },
      ...errors(401, 403, 404, 429, 503),
    },
  })
  r.registerPath({
    method: 'get',
    path: '/v1/keys/me',
    summary: 'the key itself, and what it may ask: each limit’s default and most, its network, its tier',
    security,
    responses: { 200: object('the key and its allowance'), ...errors(401) },
  })
}
