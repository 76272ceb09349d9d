// `cordon serve`: the service on loopback, its HTTP API on @hono/node-server, JSON logs (pino) on stderr.
// The admin key is printed once, on the first start, to stdout. SIGTERM or SIGINT drains (readyz 503, new
// runs 503 with Retry-After, running ones finish), then the process exits 0: the only signal handlers of
// cordon are here, in the serve entry; the library never installs any.
import type { Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { serve as listen } from '@hono/node-server'
import pino from 'pino'
import { DEFAULT_SERVER_LIMIT_CEILINGS, type ServerLimitCeilings } from './ceilings.js'
import { limitConnections } from './connections.js'
import { allowedHostsSchema } from './hosts.js'
import { type AppMount, createApp } from './http/app.js'
import { defaultDataDir } from './paths.js'
import { createService } from './service.js'
import type { Service } from './types.js'

export interface ServeOptions {
  /** Default 127.0.0.1: the API is meant for this machine unless a proxy fronts it. */
  host?: string
  /** Default 7070; 0 picks a free port (printed). */
  port?: number
  /** Default $XDG_DATA_HOME/cordon or ~/.local/share/cordon. */
  dataDir?: string
  concurrency?: number
  /** Warm members kept ready (`--warm`; default 0): see ServiceOptions.warm. */
  warm?: number
  maxQueued?: number
  /**
   * Connections held at once (default 1024), and from one address (default 256; the loopback is one
   * address, an IPv6 /64 is one). Past either, a new connection takes the slot of the oldest that has not
   * sent a whole request (connections.ts), or is closed at once when every one is being answered.
   */
  maxConnections?: number
  maxConnectionsPerAddress?: number
  /**
   * How long a connection has to send a request's headers (default 20 s), counted from its first byte or,
   * for a new one, from its start; past it, 408 and closed.
   */
  headersTimeoutMs?: number
  /** How long a connection has to send a whole request, its body included (default 2 min); past it, 408. */
  requestTimeoutMs?: number
  /** Let webhooks go to loopback or private addresses (refused by default: SSRF). */
  allowPrivateWebhooks?: boolean
  /** Routes a higher layer serves on the same service and keys (`/mcp`), given the service once it exists. */
  mounts?: (service: Service) => AppMount[]
  /** Serve /metrics without a key (default: it needs a key with the admin scope). */
  publicMetrics?: boolean
  /**
   * Host names served besides IP literals, localhost and *.localhost, against DNS rebinding: `name`,
   * `.name` (it and its subdomains) or `any` (no check). Case and a trailing dot do not matter.
   */
  allowedHosts?: readonly string[]
  /**
   * Limits no run may pass, whatever its key (`--max-output`, `--max-log`, `--max-wall-time`); default
   * 16 MiB of each, 1 h.
   */
  limitCeilings?: ServerLimitCeilings
  /** Bytes of collected files kept per run (`--max-collect`; default 64 MiB). */
  maxCollectBytes?: number
  /** Bytes a run's workspace may hold (`--max-workspace`; default 1 GiB). */
  maxWorkspaceBytes?: number
  /** Bytes of a run's open stdin held unread (`--max-stdin`; default 1 MiB), and of one key's runs (8 MiB). */
  maxStdinBuffered?: number
  maxStdinBufferedPerKey?: number
  /** How long a finished run is kept at most, whatever its key's retention (`--max-retention`; 30 days). */
  maxRetentionMs?: number
}

export interface Server {
  /** http://host:port, the port as bound. */
  url: string
  /** Drains the service, then closes the listener and the service. */
  close(): Promise<void>
}

/** Starts the service and its HTTP listener; resolves once it listens. */
export async function serve(options: ServeOptions = {}): Promise<Server> {
  const host = options.host ?? '127.0.0.1'
  // Before the data dir is touched: a bad entry is the caller's (ZodError, naming it).
  const allowedHosts = allowedHostsSchema.parse(options.allowedHosts ?? [])
  const dataDir = path.resolve(options.dataDir ?? defaultDataDir())
  const log = pino({ base: { name: 'cordon' } }, pino.destination({ fd: 2, sync: true }))
  const { service, adminKey } = await createService({
    dataDir,
    log,
    allowPrivateWebhooks: options.allowPrivateWebhooks === true,
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    ...(options.warm !== undefined ? { warm: options.warm } : {}),
    ...(options.maxQueued !== undefined ? { maxQueued: options.maxQueued } : {}),
    ...(options.maxCollectBytes !== undefined ? { maxCollectBytes: options.maxCollectBytes } : {}),
    ...(options.maxWorkspaceBytes !== undefined ? { maxWorkspaceBytes: options.maxWorkspaceBytes } : {}),
    ...(options.maxStdinBuffered !== undefined ? { maxStdinBuffered: options.maxStdinBuffered } : {}),
    ...(options.maxStdinBufferedPerKey !== undefined
      ? { maxStdinBufferedPerKey: options.maxStdinBufferedPerKey }
      : {}),
    ...(options.maxRetentionMs !== undefined ? { maxRetentionMs: options.maxRetentionMs } : {}),
    // The operator's word on a limit replaces the default for it; the others keep theirs.
    ...(options.limitCeilings
      ? { limitCeilings: { ...DEFAULT_SERVER_LIMIT_CEILINGS, ...options.limitCeilings } }
      : {}),
  })
  const { app } = createApp(service, {
    logger: log,
    publicMetrics: options.publicMetrics === true,
    allowedHosts,
    ...(options.mounts ? { mounts: options.mounts(service) } : {}),
  })

  const listening = new Promise<ReturnType<typeof listen>>((resolve, reject) => {
    const s = listen(
      {
        fetch: app.fetch,
        hostname: host,
        port: options.port ?? 7070,
        // A client that sends its headers or its body slowly (slowloris) is cut off: 20 s for the
        // headers (a connection that sends nothing included), 2 min for a whole request (Node's
        // defaults: 60 s and 5 min), looked at every second (Node's default, 30 s, let them hold on for
        // up to 50 s). A response, an event stream included, is not bounded by these. A connection idle
        // between requests is closed after Node's keep-alive timeout, 5 s.
        serverOptions: {
          // Node wants it no longer than the request's.
          headersTimeout: Math.min(options.headersTimeoutMs ?? 20_000, options.requestTimeoutMs ?? 120_000),
          requestTimeout: options.requestTimeoutMs ?? Math.max(120_000, options.headersTimeoutMs ?? 0),
          connectionsCheckingInterval: Math.min(
            1000,
            options.headersTimeoutMs ?? 1000,
            options.requestTimeoutMs ?? 1000,
          ),
        },
      },
      () => resolve(s),
    )
    // Each connection is a socket and its buffers here, key or no key: only so many at once, and only so
    // many of one address, and those that send no request give way to those that do.
    limitConnections(s as HttpServer, {
      ...(options.maxConnections !== undefined ? { max: options.maxConnections } : {}),
      ...(options.maxConnectionsPerAddress !== undefined
        ? { perAddress: options.maxConnectionsPerAddress }
        : {}),
    })
    s.once('error', reject)
  })
  let server: Awaited<typeof listening>
  try {
    server = await listening
  } catch (error) {
    // The port is taken, say: the data dir is let go before the error is told.
    await service.close()
    throw error
  }
  const address = server.address() as AddressInfo
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `http://${shown}:${address.port}`
  log.info({ url, dataDir }, 'listening')

  let closing: Promise<void> | null = null
  const close = () => {
    closing ??= (async () => {
      log.info({}, 'draining')
      await service.drain()
      // Streams of finished runs have ended; what is left open is idle.
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        if ('closeAllConnections' in server) server.closeAllConnections()
      })
      await service.close()
      log.info({}, 'stopped')
    })()
    return closing
  }

  if (adminKey) {
    process.stdout.write(
      `cordon: first start: the admin key (shown only this once; keep it secret):\ncordon: admin key: ${adminKey}\n`,
    )
  }
  // One line a script (or a test) can read the address from, --port 0 included.
  process.stdout.write(`cordon: listening on ${url}\n`)
  process.stdout.write(`cordon: dashboard: ${url}/ui\n`)
  return { url, close }
}

/** The `cordon serve` command: serve until SIGTERM or SIGINT, then drain and resolve (exit code 0). */
export async function serveUntilSignal(options: ServeOptions): Promise<void> {
  const server = await serve(options)
  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.removeListener('SIGTERM', stop)
      process.removeListener('SIGINT', stop)
      // A second signal while draining ends the process at once.
      process.once(signal, () => process.exit(130))
      server.close().then(resolve, (error: unknown) => {
        process.stderr.write(`cordon: ${error instanceof Error ? error.message : String(error)}\n`)
        process.exit(1)
      })
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
  })
}
