// `/mcp` on `cordon serve`: Streamable HTTP behind the same bearer keys as /v1 (the app authenticates
// before this runs), each request served by the serving process's service as the caller's key.
// Stateless: a new server and transport per request, no session to keep, because everything a client
// comes back for (runs, their output, stdin) lives in the service under the key, not in a session. So
// any request may go to any process, and a restart loses nothing but the calls in flight.
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import type { MountContext } from '../service/http/app.js'
import { parseJsonBody } from '../service/http/body.js'
import { byteBudget } from '../service/http/inflight.js'
import { originMatchesHost } from '../service/http/ui.js'
import type { KeyRecord, Service } from '../service/types.js'
import { DEFAULT_OUTPUT_BUDGET } from './budget.js'
import { type AnswerBytes, createMcpServer } from './tools.js'

export interface McpHttpOptions {
  /** Bytes of each text a tool returns (default 8 KiB). */
  budget?: number
  /** Tool calls waiting at once (run, read_output), per key (default 32) and in all (default 1024). */
  maxWaitsPerKey?: number
  maxWaits?: number
  version?: string
}

/** The `/mcp` route for createApp's `mounts` (through serve()'s `mounts`). */
export function mcpMount(
  service: Service,
  options: McpHttpOptions = {},
): { path: string; handler(request: Request, key: KeyRecord, context?: MountContext): Promise<Response> } {
  // Mounted by createApp, the app's answer budget is given with each request; alone, one of its own.
  const ownAnswers = byteBudget(256 * 1024 * 1024, 64 * 1024 * 1024)
  // Each waiting call holds a connection and a timer here: only so many per key, and in all. A call past
  // the bound answers at once (the run's state and output so far) instead of waiting.
  const perKey = options.maxWaitsPerKey ?? 32
  const total = options.maxWaits ?? 1024
  const waiting = new Map<string, number>()
  let all = 0
  const holdsFor = (keyId: string) => ({
    take() {
      const mine = waiting.get(keyId) ?? 0
      if (mine >= perKey || all >= total) return false
      waiting.set(keyId, mine + 1)
      all++
      return true
    },
    give() {
      const mine = (waiting.get(keyId) ?? 1) - 1
      if (mine <= 0) waiting.delete(keyId)
      else waiting.set(keyId, mine)
      all--
    },
  })
  return {
    path: '/mcp',
    async handler(request, key, context) {
      // Stateless: no session to end (DELETE), and no standalone event stream (GET), which would hold a
      // connection open with nothing ever to say on it. The spec's answer for both is 405.
      if (request.method !== 'POST') return jsonRpcError(405, 'Method not allowed.', { allow: 'POST' })
      // The spec: a server checks Origin, against DNS rebinding and pages of other sites. The key already
      // keeps a page that has none out; a browser page of another origin is refused by its Origin too.
      const host = request.headers.get('host') ?? new URL(request.url).host
      if (!originMatchesHost(request.headers.get('origin') ?? undefined, host))
        return jsonRpcError(403, 'Forbidden: the request comes from another origin.')
      // The body as /v1 reads one: UTF-8, then JSON, each refused as JSON-RPC's parse error, naming it.
      let parsedBody: unknown
      try {
        parsedBody = parseJsonBody(new Uint8Array(await request.arrayBuffer()))
      } catch (error) {
        return jsonRpcError(400, `Parse error: ${(error as Error).message}`, {}, -32700)
      }
      // Every result of the request (a batch holds up to 100 calls) takes its size from the answer budget,
      // per key and in all, until the response has been sent: one batch of 100 read_output calls of 1 MiB
      // each held 1.4 GiB here, whatever the client read.
      const budget = context?.answers ?? ownAnswers
      let held = 0
      let sent = false
      const answers: AnswerBytes = {
        take(bytes, { refusable = true } = {}) {
          // The response is gone (sent, or its client went): nothing more will be held for it.
          if (sent) return true
          if (!budget.take(bytes, key.id)) {
            if (refusable) return false
            budget.force(bytes, key.id)
          }
          held += bytes
          return true
        },
      }
      const release = () => {
        if (sent) return
        sent = true
        budget.give(held, key.id)
      }
      const server = createMcpServer({
        service,
        key,
        answers,
        budget: options.budget ?? DEFAULT_OUTPUT_BUDGET,
        // A long poll holds a connection: the HTTP API's own longest wait.
        maxWaitMs: 60_000,
        holds: holdsFor(key.id),
        ...(options.version ? { version: options.version } : {}),
      })
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined })
      await server.connect(transport)
      // The transport ends a streamed (SSE) answer once the call's response is sent; nothing else holds
      // the server, which goes with it.
      let response: Response
      try {
        response = await transport.handleRequest(request, { parsedBody })
      } catch (error) {
        release()
        throw error
      }
      return releasedAtEnd(response, release)
    },
  }
}

/** `response`, calling `release` once its body has been read to its end, failed, or been cancelled. */
function releasedAtEnd(response: Response, release: () => void): Response {
  if (!response.body) {
    release()
    return response
  }
  const reader = response.body.getReader()
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done, value } = await reader.read()
          if (!done) return controller.enqueue(value)
          release()
          controller.close()
        } catch (error) {
          release()
          controller.error(error)
        }
      },
      cancel(reason) {
        release()
        return reader.cancel(reason)
      },
    },
    { highWaterMark: 0 },
  )
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  })
}

/** An error answered before any MCP server sees the request, in JSON-RPC's shape (as the SDK answers). */
function jsonRpcError(
  status: number,
  message: string,
  headers: Record<string, string> = {},
  code = -32000,
): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: { ...headers, 'content-type': 'application/json' },
  })
}
