// `/mcp` on `cordon serve`: Streamable HTTP behind the same bearer keys as /v1 (the app authenticates
// before this runs), each request served by the serving process's service as the caller's key.
// Stateless: a new server and transport per request, no session to keep, because everything a client
// comes back for (runs, their output, stdin) lives in the service under the key, not in a session. So
// any request may go to any process, and a restart loses nothing but the calls in flight.
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { originMatchesHost } from '../service/http/ui.js'
import type { KeyRecord, Service } from '../service/types.js'
import { DEFAULT_OUTPUT_BUDGET } from './budget.js'
import { createMcpServer } from './tools.js'

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
): { path: string; handler(request: Request, key: KeyRecord): Promise<Response> } {
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
    async handler(request, key) {
      // Stateless: no session to end (DELETE), and no standalone event stream (GET), which would hold a
      // connection open with nothing ever to say on it. The spec's answer for both is 405.
      if (request.method !== 'POST') return jsonRpcError(405, 'Method not allowed.', { allow: 'POST' })
      // The spec: a server checks Origin, against DNS rebinding and pages of other sites. The key already
      // keeps a page that has none out; a browser page of another origin is refused by its Origin too.
      const host = request.headers.get('host') ?? new URL(request.url).host
      if (!originMatchesHost(request.headers.get('origin') ?? undefined, host))
        return jsonRpcError(403, 'Forbidden: the request comes from another origin.')
      const server = createMcpServer({
        service,
        key,
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
      return transport.handleRequest(request)
    },
  }
}

/** An error answered before any MCP server sees the request, in JSON-RPC's shape (as the SDK answers). */
function jsonRpcError(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }), {
    status,
    headers: { ...headers, 'content-type': 'application/json' },
  })
}
