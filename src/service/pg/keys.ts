// API keys in PostgreSQL: the key itself only as its hash; its secrets (the env values of its runs, and
// its webhook signing secret) in the clear, or sealed with the operator's secrets key (secrets.ts).
import type { KeyRecord, Scope } from '../types.js'
import { type Db, iso, isoOrNull, type Queryable, q } from './db.js'
import type { Sealer } from './secrets.js'

interface KeyRow {
  id: string
  name: string
  hash: string
  scopes: Scope[]
  ceilings: Record<string, unknown>
  quota: KeyRecord['quota']
  secrets: Record<string, string> | null
  webhook_secret: string | null
  sealed: Buffer | null
  retention_ms: number | null
  created_at: Date
  revoked_at: Date | null
}

const KEY_COLUMNS =
  'id, name, hash, scopes, ceilings, quota, secrets, webhook_secret, sealed, retention_ms, created_at, revoked_at'

export class Keys {
  constructor(
    private readonly db: Db,
    private readonly sealer: Sealer | null,
  ) {}

  private toKey(r: KeyRow): KeyRecord {
    let secrets = r.secrets
    let webhookSecret = r.webhook_secret
    if (r.sealed) {
      if (!this.sealer) throw new Error(`the secrets of key ${r.id} are sealed, and no secrets key was given`)
      const opened = this.sealer.openKey(r.id, r.sealed)
      secrets = opened.secrets
      webhookSecret = opened.webhookSecret
    }
    return {
      id: r.id,
      name: r.name,
      hash: r.hash,
      scopes: r.scopes,
      ceilings: r.ceilings,
      quota: r.quota,
      secrets: secrets ?? {},
      retentionMs: r.retention_ms,
      webhookSecret: webhookSecret ?? '',
      createdAt: iso(r.created_at),
      revokedAt: isoOrNull(r.revoked_at),
    }
  }

  async create(key: KeyRecord): Promise<void> {
    const sealed = this.sealer?.sealKey(key.id, { secrets: key.secrets, webhookSecret: key.webhookSecret })
    await this.db.rows(
      `INSERT INTO keys (id, name, hash, scopes, ceilings, quota, secrets, webhook_secret, sealed,
                         retention_ms, created_at, revoked_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        key.id,
        JSON.stringify(key.name),
        key.hash,
        JSON.stringify(key.scopes),
        JSON.stringify(key.ceilings),
        JSON.stringify(key.quota),
        sealed ? null : JSON.stringify(key.secrets),
        sealed ? null : key.webhookSecret,
        sealed ?? null,
        key.retentionMs,
        key.createdAt,
        key.revokedAt,
      ],
    )
  }

  async byHash(hash: string): Promise<KeyRecord | null> {
    const row = await this.db.row<KeyRow>(`SELECT ${KEY_COLUMNS} FROM keys WHERE hash = $1`, [hash])
    return row ? this.toKey(row) : null
  }

  async get(id: string): Promise<KeyRecord | null> {
    const row = await this.db.row<KeyRow>(`SELECT ${KEY_COLUMNS} FROM keys WHERE id = $1`, [id])
    return row ? this.toKey(row) : null
  }

  async list(): Promise<KeyRecord[]> {
    const rows = await this.db.rows<KeyRow>(`SELECT ${KEY_COLUMNS} FROM keys ORDER BY created_at, id`)
    return rows.map((r) => this.toKey(r))
  }

  async revoke(id: string, at: string): Promise<boolean> {
    const rows = await this.db.rows(
      'UPDATE keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING id',
      [id, at],
    )
    return rows.length === 1
  }
}

/** Seals the secrets of every key stored in the clear, in the caller's transaction; how many. */
export async function sealAll(c: Queryable, sealer: Sealer): Promise<number> {
  const rows = await q<{ id: string; secrets: Record<string, string>; webhook_secret: string }>(
    c,
    'SELECT id, secrets, webhook_secret FROM keys WHERE sealed IS NULL FOR UPDATE',
  )
  for (const r of rows) {
    const sealed = sealer.sealKey(r.id, { secrets: r.secrets, webhookSecret: r.webhook_secret })
    await q(c, 'UPDATE keys SET sealed = $2, secrets = NULL, webhook_secret = NULL WHERE id = $1', [
      r.id,
      sealed,
    ])
  }
  return rows.length
}
