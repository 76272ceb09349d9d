// One server per data dir. Two would each take the other's running runs for a dead server's (and end them
// `interrupted` on start), run the same queued runs twice and race on the workspaces. The lock is SQLite's
// own (a POSIX record lock on <dataDir>/serve.lock, held by an open exclusive transaction): the kernel
// drops it when the process ends, SIGKILL included, so there is no pid file to go stale. cordon.db itself
// is not locked: `cordon keys` opens it while a server runs.
import { chmodSync, closeSync, openSync } from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { ServiceError } from './types.js'

export interface DataDirLock {
  release(): void
}

/** Kept for the process's life (see SqliteStore.stmt: a collected database can abort Node 24). */
const KEPT: unknown[] = []

/** Takes the data dir's lock, or throws ServiceError('conflict') at once when another process holds it. */
export function lockDataDir(dataDir: string): DataDirLock {
  const file = path.join(dataDir, 'serve.lock')
  closeSync(openSync(file, 'a', 0o600))
  chmodSync(file, 0o600)
  // timeout 0: a held lock is an answer now, not after better-sqlite3's default 5 s of retrying.
  const db = new Database(file, { timeout: 0 })
  KEPT.push(db)
  try {
    db.exec('PRAGMA locking_mode = EXCLUSIVE')
    db.exec('BEGIN EXCLUSIVE')
  } catch (error) {
    db.close()
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY')
      throw new ServiceError(
        'conflict',
        `${dataDir} is in use by another cordon serve (one server per data dir; \`cordon keys\` may still use it)`,
      )
    throw error
  }
  return {
    release() {
      if (db.open) db.close()
    },
  }
}
