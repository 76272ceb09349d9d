// Opening the PostgreSQL store: `pg` loaded, a Pool, the schema checked or migrated (migrations.ts), and
// the keys' secrets sealed when the operator gives a secrets key (secrets.ts). Whatever fails says so
// without the URL's password: the URL is redacted, and the error is a new one (a URL parser's error keeps
// its input).
import { Db, loadPg, PgStoreError, poolConfig, q, storeError } from './db.js'
import { sealAll } from './keys.js'
import { MIGRATION_LOCK, migrate, SchemaError } from './migrations.js'
import { readSecretsKey, Sealer } from './secrets.js'
import { type Liveness, PgStore } from './store.js'

export interface PgStoreOptions {
  /**
   * Bring the schema to this cordon's version (an API node). False: only check it is there, and refuse
   * an older one (a worker, `--no-migrate`). A newer one is refused either way.
   */
  migrate: boolean
  /** How a worker's death is seen (default 'session'; 'lease' behind PgBouncer in transaction mode). */
  liveness?: Liveness
  /**
   * A file of exactly 32 bytes: keys' secrets are sealed with it (AES-256-GCM). Every node of a store
   * whose secrets are sealed needs it; given to a store in the clear, an API node (`migrate`) seals the
   * keys already there.
   */
  secretsKeyFile?: string
  /** The same, as bytes. */
  secretsKey?: Buffer
  /** Connections of the pool, at most (default 10). */
  poolSize?: number
}

const CHECK = 'secrets-check'

export async function openPgStore(url: string, options: PgStoreOptions): Promise<PgStore> {
  const pgm = await loadPg()
  const key = options.secretsKey ?? (options.secretsKeyFile ? readSecretsKey(options.secretsKeyFile) : null)
  const sealer = key ? new Sealer(Buffer.from(key)) : null
  let pool: InstanceType<typeof pgm.Pool>
  try {
    pool = new pgm.Pool(poolConfig(pgm, url, options.poolSize ?? 10))
  } catch (error) {
    throw storeError(url, 'not a PostgreSQL URL', error)
  }
  // An idle connection that drops is replaced by the pool at the next query; without a listener, its
  // error would end the process.
  pool.on('error', () => undefined)
  const db = new Db(pool, url)
  try {
    const client = await pool.connect().catch((error: unknown) => {
      throw storeError(url, 'cannot connect to the PostgreSQL store', error)
    })
    try {
      await migrate(client, { allowed: options.migrate })
    } finally {
      client.release()
    }
    await checkSecrets(db, sealer, options.migrate)
  } catch (error) {
    await pool.end().catch(() => undefined)
    if (error instanceof SchemaError || error instanceof PgStoreError) throw error
    throw storeError(url, 'cannot open the PostgreSQL store', error)
  }
  return new PgStore(db, pgm, { liveness: options.liveness ?? 'session', sealer })
}

/**
 * A store whose secrets are sealed opens only with the key that sealed them. Given a key, a node that may
 * migrate seals what is in the clear (all of it, the first time: the check value and every key's secrets
 * in one transaction under the migration lock).
 */
async function checkSecrets(db: Db, sealer: Sealer | null, allowed: boolean): Promise<void> {
  const wrongKey = () =>
    new SchemaError("the secrets key given is not the one this store's key secrets are sealed with")
  const row = await db.row<{ value: Buffer }>('SELECT value FROM cordon_settings WHERE name = $1', [CHECK])
  if (row && !sealer)
    throw new SchemaError(
      "this store's key secrets are sealed: give its secrets key (the same file on every node)",
    )
  if (!sealer) return
  if (row && !sealer.verifies(row.value)) throw wrongKey()
  if (!allowed) return // a worker reads what is in the clear as it is; API nodes seal it
  await db.tx(async (c) => {
    await q(c, 'SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    const [again] = await q<{ value: Buffer }>(c, 'SELECT value FROM cordon_settings WHERE name = $1', [
      CHECK,
    ])
    if (again && !sealer.verifies(again.value)) throw wrongKey()
    if (!again)
      await q(c, 'INSERT INTO cordon_settings (name, value) VALUES ($1, $2)', [CHECK, sealer.check()])
    await sealAll(c, sealer)
  })
}
