// `cordon serve` and `cordon keys create|list|revoke`. The service (hono, SQLite, pino, prom-client) is
// imported only when one of these runs: it is not in the CLI's bundle (scripts/bundle.mjs keeps
// ../service/ out), so a plain `cordon run` neither reads nor compiles any of it.
import { InvalidArgumentError } from 'commander'
import { policySchema } from '../index.js'
import { KeyFlagError, keyCreateBody, keyFlagFor } from './keys.js'

/** commander's parser for a whole number within bounds. */
export function wholeNumber(min: number, max: number): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max)
      throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`)
    return Number(value)
  }
}

/** commander's parser for a duration as the options write one (`90s`, `2h`, `30d`, or ms). */
export function durationArg(value: string): number {
  const days = /^(\d+)d$/.exec(value.trim())
  if (days) return Number(days[1]) * 86_400_000
  const parsed = policySchema.shape.limits.unwrap().shape.wallTimeMs.unwrap().safeParse(value)
  if (!parsed.success || parsed.data <= 0)
    throw new InvalidArgumentError('must be a duration such as 90s, 2h or 30d')
  return parsed.data
}

/** commander's parser for a size as the options write one (`16M`, `1G`). */
export function sizeArg(value: string): number {
  const parsed = policySchema.shape.limits.unwrap().shape.maxOutputBytes.unwrap().safeParse(value)
  if (!parsed.success) throw new InvalidArgumentError('must be a size such as 16M or 1G')
  return parsed.data
}

interface ServeValues {
  host?: string
  port?: number
  dataDir?: string
  concurrency?: number
  warm?: number
  maxQueued?: number
  maxConnections?: number
  maxConnectionsPerAddress?: number
  allowPrivateWebhooks?: boolean
  publicMetrics?: boolean
  allowedHost?: string[]
  maxOutput?: number
  maxLog?: number
  maxWallTime?: number
  maxCollect?: number
  maxWorkspace?: number
  maxStdin?: number
  maxStdinPerKey?: number
  maxRetention?: number
}

export function serveCommand(values: ServeValues): Promise<number> {
  // A data dir another server holds is said in one line (exit 125), as any setup error of cordon's.
  return said(async () => {
    // The Host allowlist, by the service's own schema: a bad entry is told as the flag's, exit 125.
    const { allowedHostsSchema } = await import('../service/hosts.js')
    const hosts = allowedHostsSchema.safeParse(values.allowedHost ?? [])
    if (!hosts.success) throw new KeyFlagError('--allowed-host', hosts.error.issues[0]?.message ?? 'invalid')
    const { serveUntilSignal } = await import('../service/serve.js')
    const { mcpMount } = await import('../mcp/http.js')
    await serveUntilSignal({
      // MCP (Streamable HTTP) at /mcp, behind the same keys: composed here, the service knows nothing of it.
      mounts: (service) => [mcpMount(service)],
      ...(values.host !== undefined ? { host: values.host } : {}),
      ...(values.port !== undefined ? { port: values.port } : {}),
      ...(values.dataDir !== undefined ? { dataDir: values.dataDir } : {}),
      ...(values.concurrency !== undefined ? { concurrency: values.concurrency } : {}),
      ...(values.warm !== undefined ? { warm: values.warm } : {}),
      ...(values.maxQueued !== undefined ? { maxQueued: values.maxQueued } : {}),
      ...(values.maxConnections !== undefined ? { maxConnections: values.maxConnections } : {}),
      ...(values.maxConnectionsPerAddress !== undefined
        ? { maxConnectionsPerAddress: values.maxConnectionsPerAddress }
        : {}),
      ...(values.allowedHost !== undefined ? { allowedHosts: values.allowedHost } : {}),
      allowPrivateWebhooks: values.allowPrivateWebhooks === true,
      publicMetrics: values.publicMetrics === true,
      ...(values.maxOutput !== undefined || values.maxLog !== undefined || values.maxWallTime !== undefined
        ? {
            limitCeilings: {
              ...(values.maxOutput !== undefined ? { maxOutputBytes: values.maxOutput } : {}),
              ...(values.maxLog !== undefined ? { maxLogBytes: values.maxLog } : {}),
              ...(values.maxWallTime !== undefined ? { wallTimeMs: values.maxWallTime } : {}),
            },
          }
        : {}),
      ...(values.maxCollect !== undefined ? { maxCollectBytes: values.maxCollect } : {}),
      ...(values.maxWorkspace !== undefined ? { maxWorkspaceBytes: values.maxWorkspace } : {}),
      ...(values.maxStdin !== undefined ? { maxStdinBuffered: values.maxStdin } : {}),
      ...(values.maxStdinPerKey !== undefined ? { maxStdinBufferedPerKey: values.maxStdinPerKey } : {}),
      ...(values.maxRetention !== undefined ? { maxRetentionMs: values.maxRetention } : {}),
    })
    return 0
  })
}

/** A refusal of the service (ServiceError: an unknown key, an invalid field) as one line, exit code 125. */
async function said(body: () => Promise<number>): Promise<number> {
  try {
    return await body()
  } catch (error) {
    if (!(error instanceof Error)) throw error
    // An invalid field (zod's error, from the key schema): the first issue, naming the flag that set it
    // (and, for what only --body sets, the field).
    const issue = (error as { issues?: { path: PropertyKey[]; message: string }[] }).issues?.[0]
    if (error.name === 'ZodError' && issue) {
      const flag = keyFlagFor(issue.path)
      const field = flag === '--body' && issue.path.length > 0 ? `${issue.path.map(String).join('.')}: ` : ''
      process.stderr.write(`cordon: ${flag}: ${field}${issue.message}\n`)
      return 125
    }
    if (error instanceof KeyFlagError) {
      process.stderr.write(`cordon: ${error.flag}: ${error.message}\n`)
      return 125
    }
    if (error.name !== 'ServiceError') throw error
    process.stderr.write(`cordon: ${error.message}\n`)
    return 125
  }
}

interface KeysValues {
  dataDir?: string
  json?: boolean
}

export function keysCreateCommand(values: KeysValues & Record<string, unknown>): Promise<number> {
  return said(async () => {
    // The body first: a bad flag is told before the data dir is opened.
    const body = keyCreateBody(values)
    const { openKeyAdmin } = await import('../service/admin.js')
    const admin = openKeyAdmin(values.dataDir)
    try {
      const { record, key } = admin.create(body)
      // The key and its webhook secret are shown this once.
      const secrets = { key, webhookSecret: record.webhookSecret }
      if (values.json)
        process.stdout.write(`${JSON.stringify({ ...admin.view(record), ...secrets }, null, 2)}\n`)
      else
        process.stdout.write(
          `${record.id}\t${record.name}\t${record.scopes.join(',')}\nkey: ${key}\nwebhook secret: ${record.webhookSecret}\n`,
        )
      return 0
    } finally {
      admin.close()
    }
  })
}

export function keysListCommand(values: KeysValues): Promise<number> {
  return said(async () => {
    const { openKeyAdmin } = await import('../service/admin.js')
    const admin = openKeyAdmin(values.dataDir)
    try {
      const keys = admin.list()
      if (values.json) process.stdout.write(`${JSON.stringify(keys.map(admin.view), null, 2)}\n`)
      else
        for (const k of keys)
          process.stdout.write(
            `${k.id}\t${k.name}\t${k.scopes.join(',')}\t${k.revokedAt ? 'revoked' : 'active'}\n`,
          )
      return 0
    } finally {
      admin.close()
    }
  })
}

export function keysRevokeCommand(id: string, values: KeysValues): Promise<number> {
  return said(async () => {
    const { openKeyAdmin } = await import('../service/admin.js')
    const admin = openKeyAdmin(values.dataDir)
    try {
      admin.revoke(id)
      return 0
    } finally {
      admin.close()
    }
  })
}
