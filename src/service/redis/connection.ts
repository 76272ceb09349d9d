// Connections to the Redis that carries run ids to workers (BullMQ) and live copies of events and control
// messages (pub/sub). Redis holds nothing the store does not: losing it delays runs, it loses none.
import type { Redis, RedisOptions } from 'ioredis'

/**
 * The connection options a queue URL stands for: `redis://[user:pass@]host[:port][/db]`, `rediss://…`
 * (TLS), or a unix socket `unix:///path/redis.sock` / `redis+unix:///path/redis.sock[?db=N]`. Throws an
 * Error naming what is wrong with it.
 */
export function redisOptions(url: string): RedisOptions {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new Error(`not a Redis URL: ${redactUrl(url)}`)
  }
  const db = parsed.protocol.endsWith('unix:')
    ? Number(parsed.searchParams.get('db') ?? 0)
    : Number(parsed.pathname.replace(/^\//, '') || 0)
  if (!Number.isInteger(db) || db < 0) throw new Error(`${redactUrl(url)}: the database must be a number`)
  const auth = {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
  }
  // BullMQ's workers block on Redis and must retry for ever, not fail a command after 20 retries.
  const common: RedisOptions = { ...auth, db, maxRetriesPerRequest: null, lazyConnect: false }
  switch (parsed.protocol) {
    case 'unix:':
    case 'redis+unix:':
      if (!parsed.pathname) throw new Error(`${redactUrl(url)}: no socket path`)
      return { ...common, path: decodeURIComponent(parsed.pathname) }
    case 'redis:':
    case 'rediss:':
      return {
        ...common,
        host: parsed.hostname || '127.0.0.1',
        port: parsed.port ? Number(parsed.port) : 6379,
        ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
      }
    default:
      throw new Error(
        `${redactUrl(url)}: a Redis URL starts with redis://, rediss://, unix:// or redis+unix://`,
      )
  }
}

/** `url` with its password replaced, for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z+]+:\/\/[^:/@]*:)[^@/]*@/i, '$1***@')
}

/** A new connection (ioredis is loaded only in scale-out mode: an optional dependency). */
export async function connectRedis(url: string, name: string): Promise<Redis> {
  let IORedis: typeof import('ioredis').Redis
  try {
    IORedis = (await import('ioredis')).Redis
  } catch {
    throw new Error('the Redis queue needs the optional packages bullmq and ioredis: npm i bullmq ioredis pg')
  }
  return new IORedis({ ...redisOptions(url), connectionName: name })
}

/**
 * Refuses a Redis that may evict keys: BullMQ's jobs are keys, and an evicted one is a run that waits for
 * the orphan sweep instead of a worker (BullMQ's own production rule).
 */
export async function checkEvictionPolicy(redis: Redis): Promise<void> {
  const reply = (await redis.config('GET', 'maxmemory-policy')) as string[]
  const policy = reply[1]
  if (policy && policy !== 'noeviction')
    throw new Error(`Redis maxmemory-policy is ${policy}; queued runs could be evicted: set it to noeviction`)
}
