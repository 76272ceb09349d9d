// The PostgreSQL connection of a store: `pg` loaded only when a PostgreSQL store is asked for (an optional
// dependency), a Pool for the queries, transactions, and the URL kept out of every message. Every
// statement of the store is a fixed string with parameters: nothing of a request is ever spliced into SQL.
import type { Pool, PoolClient, PoolConfig, QueryResultRow } from 'pg'

export type PgModule = typeof import('pg')

/** `pg`, or an error saying how to install it. */
export async function loadPg(): Promise<PgModule> {
  try {
    const loaded = (await import('pg')) as PgModule & { default?: PgModule }
    return loaded.default ?? loaded
  } catch {
    throw new Error('the PostgreSQL store needs the optional packages: npm i bullmq ioredis pg')
  }
}

/**
 * `url` with its secrets replaced, for messages and logs: the password of its user part
 * (`postgres://user:***@host/db`) and of its parameters (`?password=***`, `sslpassword`, `sslkey`).
 */
export function redactUrl(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@?#]*:)[^@/?#]*@/i, '$1***@')
    .replace(/([?&](?:password|sslpassword|sslkey)=)[^&#]*/gi, '$1***')
}

/** The secrets a URL carries, to be removed from any message that might repeat one of them. */
function secretsOf(url: string): string[] {
  const found: string[] = []
  try {
    const parsed = new URL(url)
    if (parsed.password) found.push(parsed.password, decodeURIComponent(parsed.password))
    for (const name of ['password', 'sslpassword', 'sslkey']) {
      const value = parsed.searchParams.get(name)
      if (value) found.push(value, encodeURIComponent(value))
    }
  } catch {
    // not a URL: the pattern of redactUrl is all there is
  }
  return found.filter((s) => s.length > 0)
}

/** The store could not be reached or opened: its message names the URL, redacted. */
export class PgStoreError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message)
    this.name = 'PgStoreError'
  }
}

/**
 * A new error saying `what` about the store at `url`, with no secret of the URL in it (not in its
 * message, not in any property: the cause is not kept, since a URL parser's error carries the input).
 */
export function storeError(url: string, what: string, cause: unknown): PgStoreError {
  let message = cause instanceof Error ? cause.message : String(cause)
  for (const secret of secretsOf(url)) message = message.split(secret).join('***')
  const code = (cause as { code?: unknown } | null)?.code
  return new PgStoreError(
    `${what} (${redactUrl(url)}): ${redactUrl(message)}`,
    typeof code === 'string' ? code : undefined,
  )
}

/** A pool, or one of its clients in a transaction. */
export type Queryable = Pick<PoolClient, 'query'>

/**
 * The rows of one statement. A text parameter reaches PostgreSQL as UTF-8, where a NUL is refused (an
 * error, where SQLite would answer "no such run"): a NUL in a string parameter (a run id from a URL) is
 * sent as U+FFFD, which no id or name the store made holds. Whatever must keep its NULs goes as json
 * (escaped) or as bytes.
 */
export async function q<R extends QueryResultRow>(
  c: Queryable,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  const safe = params.map((p) =>
    typeof p === 'string' && p.includes('\0') ? p.replaceAll('\0', '\uFFFD') : p,
  )
  return (await c.query<R>(sql, safe)).rows
}

/** The query side of a store: the Pool, and transactions on one of its clients. */
export class Db {
  constructor(
    readonly pool: Pool,
    readonly url: string,
  ) {}

  rows<R extends QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
    return q<R>(this.pool, sql, params)
  }

  async row<R extends QueryResultRow>(sql: string, params: unknown[] = []): Promise<R | undefined> {
    return (await q<R>(this.pool, sql, params))[0]
  }

  /** `fn` in one transaction (READ COMMITTED) on one client: committed when it resolves, else rolled back. */
  async tx<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect()
    let broken = false
    try {
      await client.query('BEGIN')
      const out = await fn(client)
      await client.query('COMMIT')
      return out
    } catch (error) {
      try {
        await client.query('ROLLBACK')
      } catch {
        broken = true // the connection is gone: the pool must not hand it out again
      }
      throw error
    } finally {
      client.release(broken)
    }
  }
}

/** int8 (counts, seqs, byte offsets, milliseconds) as numbers: every one the store keeps is < 2^53. */
export function poolConfig(pgm: PgModule, url: string, max: number): PoolConfig {
  const INT8 = 20
  return {
    connectionString: url,
    max,
    application_name: 'cordon',
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8 && format !== 'binary'
          ? (value: string) => Number(value)
          : pgm.types.getTypeParser(oid, format ?? 'text')) as never,
    },
  }
}

/** A timestamp as the API has it: ISO 8601, UTC, milliseconds. */
export const iso = (d: Date): string => d.toISOString()
export const isoOrNull = (d: Date | null): string | null => (d === null ? null : d.toISOString())

/** The PostgreSQL error code of `error` (23503: a foreign key's row is gone…). */
export const pgCode = (error: unknown): string | undefined => {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}
