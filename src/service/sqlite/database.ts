// The SQLite file under the store (<dataDir>/cordon.db): opened 0600 in a 0700 dir, WAL mode (readers go on
// while a run writes), its schema brought up to date, its statements prepared once and kept. Everything
// on it is synchronous: one transaction is one call, and the service's single thread never sees half of
// one. The store's promises (sqlite.ts) are made around these calls.
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs'
import path from 'node:path'
import Database, { type Statement } from 'better-sqlite3'
import { MIGRATIONS } from './migrations.js'

/**
 * Every store's database and statements, never released (see SqliteDatabase.stmt): the database too, since
 * better-sqlite3 keeps the statements of its transactions (BEGIN, COMMIT…) for as long as it lives.
 */
const KEPT: unknown[] = []

export interface SqliteOptions {
  /** The store's clock, ms since the epoch (default Date.now): when runs start and end, leases, minutes. */
  now?: () => number
}

export class SqliteDatabase {
  readonly db: Database.Database
  /** The store's clock. */
  readonly now: () => number
  private readonly statements = new Map<string, Statement>()

  /** Opens (creating, 0700/0600) `<dataDir>/cordon.db` and brings its schema up to date. */
  constructor(dataDir: string, options: SqliteOptions = {}) {
    this.now = options.now ?? Date.now
    mkdirSync(dataDir, { recursive: true, mode: 0o700 })
    chmodSync(dataDir, 0o700)
    const file = path.join(dataDir, 'cordon.db')
    // Create it 0600 before SQLite does (SQLite would honour the umask).
    closeSync(openSync(file, 'a', 0o600))
    chmodSync(file, 0o600)
    this.db = new Database(file)
    KEPT.push(this.db, this.statements)
    this.db.exec('PRAGMA journal_mode = WAL')
    this.db.exec('PRAGMA busy_timeout = 5000')
    this.db.exec('PRAGMA synchronous = NORMAL')
    this.db.exec('PRAGMA foreign_keys = ON')
    this.migrate()
  }

  /** The store's clock as an ISO 8601 instant (UTC), `plusMs` from now. */
  iso(plusMs = 0): string {
    return new Date(this.now() + plusMs).toISOString()
  }

  /** `fn` as one transaction, taking the write lock at once (BEGIN IMMEDIATE): all of it or nothing. */
  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate()
  }

  /** The schema's version: how many MIGRATIONS have run. */
  version(): number {
    const row = this.stmt('SELECT version FROM schema_version').get() as { version: number } | undefined
    return row?.version ?? 0
  }

  private migrate(): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)')
    this.tx(() => {
      const { n } = this.stmt('SELECT COUNT(*) AS n FROM schema_version').get() as { n: number }
      if (n === 0) this.stmt('INSERT INTO schema_version (version) VALUES (0)').run()
      const from = this.version()
      if (from > MIGRATIONS.length) {
        throw new Error(`cordon.db has schema version ${from}, newer than this cordon (${MIGRATIONS.length})`)
      }
      for (let v = from; v < MIGRATIONS.length; v++) this.db.exec(MIGRATIONS[v] as string)
      this.stmt('UPDATE schema_version SET version = ?').run(MIGRATIONS.length)
    })
  }

  /**
   * The statement for `sql`, prepared once and kept for the process's life. better-sqlite3 (12.x) on Node
   * 24 aborts the process (`RemoveEnvironmentCleanupHook: Assertion failed: (env) != nullptr`) when V8
   * collects a Statement at the wrong moment, at exit or mid-run; a statement that is never garbage is
   * never collected. The set is bounded by the SQL the store writes, so no SQL may vary with a request's
   * input (a count of filters, say) but through its parameters. Its iterators (`.iterate()`) abort the
   * same way when collected, and cannot be kept: rows are read a few at a time with LIMIT instead.
   */
  stmt(sql: string): Statement {
    let made = this.statements.get(sql)
    if (!made) {
      made = this.db.prepare(sql)
      this.statements.set(sql, made)
    }
    return made
  }

  close(): void {
    if (this.db.open) this.db.close()
  }
}
