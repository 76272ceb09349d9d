// API keys in SQLite: their secret only as a hash; their own secrets as given (the data dir is 0700).
import type { KeyRecord } from '../types.js'
import type { SqliteDatabase } from './database.js'
import { type KeyRow, toKey } from './rows.js'

export function createKey(d: SqliteDatabase, key: KeyRecord): void {
  d.stmt(
    `INSERT INTO keys (id, name, hash, scopes, ceilings, quota, secrets, retention_ms, webhook_secret,
                       created_at, revoked_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    key.id,
    key.name,
    key.hash,
    JSON.stringify(key.scopes),
    JSON.stringify(key.ceilings),
    JSON.stringify(key.quota),
    JSON.stringify(key.secrets),
    key.retentionMs,
    key.webhookSecret,
    key.createdAt,
    key.revokedAt,
  )
}

export function keyByHash(d: SqliteDatabase, hash: string): KeyRecord | null {
  const row = d.stmt('SELECT * FROM keys WHERE hash = ?').get(hash) as KeyRow | undefined
  return row ? toKey(row) : null
}

export function getKey(d: SqliteDatabase, id: string): KeyRecord | null {
  const row = d.stmt('SELECT * FROM keys WHERE id = ?').get(id) as KeyRow | undefined
  return row ? toKey(row) : null
}

export function listKeys(d: SqliteDatabase): KeyRecord[] {
  return (d.stmt('SELECT * FROM keys ORDER BY created_at, id').all() as KeyRow[]).map(toKey)
}

export function revokeKey(d: SqliteDatabase, id: string, at: string): boolean {
  return (
    d.stmt('UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(at, id).changes === 1
  )
}
