// The PostgreSQL store's schema, grown by appending to MIGRATIONS. API nodes migrate as they start, any
// number at once: the migration runs in one transaction holding an advisory lock, so concurrent starts
// take turns and the later ones find the work done. Workers never migrate; they refuse a store older than
// they need. A store newer than this cordon is refused by both: it may hold what this code cannot read.
//
// Expand, then contract: migration n must leave a schema that the code of version n-1 still reads and
// writes (new columns nullable or defaulted, new tables, new indexes), so API nodes and workers can be
// upgraded one at a time. What the old code needed is dropped a release later, never in the same one.
//
// Why `json` and not `jsonb` for what a client or a program wrote (requests, results, events, metadata,
// key names): jsonb refuses a string holding \u0000 or a lone surrogate ("unsupported Unicode escape
// sequence"), both of which JSON.parse accepts from a request body and a program can write to its log
// channel, so a run's own data could make its insert or its finish fail. json keeps the text as written
// (and its keys in order, as SQLite does). The metadata filter needs containment, and so a GIN index: it
// works on `metadata_index`, a jsonb copy whose strings are escaped (rows.ts metadataIndex).
import type { PoolClient } from 'pg'

/** Each entry takes the schema from version i to i+1; never edit one that shipped, append. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE runs (
     id text COLLATE "C" PRIMARY KEY,
     key_id text COLLATE "C" NOT NULL,
     state text NOT NULL CHECK (state IN ('queued', 'running', 'finished')),
     status text,
     created_at timestamptz NOT NULL,
     queued_at timestamptz NOT NULL DEFAULT now(),
     started_at timestamptz,
     finished_at timestamptz,
     metadata json NOT NULL,
     metadata_index jsonb NOT NULL,
     request json NOT NULL,
     cmd json NOT NULL,
     has_webhook boolean NOT NULL,
     stdin_open boolean NOT NULL,
     result json,
     summary json,
     text_from_events boolean NOT NULL DEFAULT false,
     view_bytes bigint,
     worker_id text,
     attempt integer NOT NULL DEFAULT 0,
     lease_until timestamptz,
     cancel_requested_at timestamptz,
     lost_at timestamptz,
     lost_told boolean NOT NULL DEFAULT false,
     last_seq bigint NOT NULL DEFAULT 0,
     out_stdout bigint NOT NULL DEFAULT 0,
     out_stderr bigint NOT NULL DEFAULT 0,
     out_merged bigint NOT NULL DEFAULT 0,
     stdin_seq bigint NOT NULL DEFAULT 0,
     stdin_closed boolean NOT NULL DEFAULT false
   );
   CREATE INDEX runs_by_created ON runs (created_at DESC, id DESC);
   CREATE INDEX runs_by_key ON runs (key_id, created_at DESC, id DESC);
   CREATE INDEX runs_by_state ON runs (state, created_at DESC, id DESC);
   CREATE INDEX runs_unfinished ON runs (key_id) WHERE state <> 'finished';
   CREATE INDEX runs_queued ON runs (queued_at, id) WHERE state = 'queued';
   CREATE INDEX runs_running_lease ON runs (lease_until) WHERE state = 'running';
   CREATE INDEX runs_running_worker ON runs (worker_id) WHERE state = 'running';
   CREATE INDEX runs_lost ON runs (worker_id) WHERE lost_at IS NOT NULL AND NOT lost_told;
   CREATE INDEX runs_finished ON runs (finished_at) WHERE state = 'finished';
   CREATE INDEX runs_metadata ON runs USING gin (metadata_index jsonb_path_ops);

   CREATE TABLE events (
     run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
     seq bigint NOT NULL,
     type text NOT NULL,
     at timestamptz NOT NULL,
     data json NOT NULL,
     bytes bytea,
     out_stream text,
     out_end bigint,
     merged_end bigint,
     PRIMARY KEY (run_id, seq)
   );
   CREATE INDEX events_by_stream_end ON events (run_id, out_stream, out_end) WHERE out_stream IS NOT NULL;
   CREATE INDEX events_by_merged_end ON events (run_id, merged_end) WHERE merged_end IS NOT NULL;

   CREATE TABLE stdin (
     run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
     seq bigint NOT NULL,
     key_id text NOT NULL,
     data bytea,
     PRIMARY KEY (run_id, seq)
   );
   CREATE INDEX stdin_by_key ON stdin (key_id);

   CREATE TABLE run_files (
     run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
     path text COLLATE "C" NOT NULL,
     bytes bytea NOT NULL,
     PRIMARY KEY (run_id, path)
   );
   -- Uncompressed out of line: a file is read a slice at a time (substring reads only its pages).
   ALTER TABLE run_files ALTER COLUMN bytes SET STORAGE EXTERNAL;

   CREATE TABLE keys (
     id text COLLATE "C" PRIMARY KEY,
     name json NOT NULL,
     hash text NOT NULL UNIQUE,
     scopes json NOT NULL,
     ceilings json NOT NULL,
     quota json NOT NULL,
     secrets json,
     webhook_secret text,
     sealed bytea,
     retention_ms bigint,
     created_at timestamptz NOT NULL,
     revoked_at timestamptz,
     CHECK ((sealed IS NULL) = (secrets IS NOT NULL AND webhook_secret IS NOT NULL))
   );
   -- One row per admission of a key with runsPerMinute, kept a minute: at most runsPerMinute a key.
   CREATE TABLE key_admissions (
     key_id text COLLATE "C" NOT NULL,
     at timestamptz NOT NULL
   );
   CREATE INDEX key_admissions_by_key ON key_admissions (key_id, at);

   CREATE TABLE webhook_attempts (
     run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
     attempt integer NOT NULL,
     at timestamptz NOT NULL,
     status integer,
     error text,
     duration_ms integer NOT NULL,
     PRIMARY KEY (run_id, attempt)
   );
   CREATE TABLE webhook_pending (
     run_id text PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
     attempt integer NOT NULL,
     at timestamptz NOT NULL,
     claimed_by text,
     claimed_until timestamptz,
     claim_ms integer
   );
   CREATE INDEX webhook_pending_due ON webhook_pending (at);

   CREATE TABLE workers (
     id text COLLATE "C" PRIMARY KEY,
     host text NOT NULL,
     pid integer NOT NULL,
     version text NOT NULL,
     concurrency integer NOT NULL,
     backend_pid integer,
     backend_start timestamptz,
     started_at timestamptz NOT NULL DEFAULT now(),
     heartbeat_at timestamptz NOT NULL DEFAULT now(),
     draining boolean NOT NULL DEFAULT false
   );

   CREATE TABLE cordon_settings (
     name text PRIMARY KEY,
     value bytea NOT NULL
   );`,
]

/** The one lock every migration (and every check of the version) takes: "cord". */
export const MIGRATION_LOCK = 0x636f7264

/** A schema this cordon cannot use: newer than it, or (for a node that may not migrate) older. */
export class SchemaError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'SchemaError'
  }
}

/** The version the store is at (0: no cordon schema yet), in a transaction of `client`'s. */
async function versionOf(client: PoolClient): Promise<number> {
  const table = await client.query<{ t: string | null }>(`SELECT to_regclass('cordon_schema')::text AS t`)
  if (!table.rows[0]?.t) return 0
  const row = await client.query<{ version: number }>('SELECT version FROM cordon_schema')
  return row.rows[0]?.version ?? 0
}

/**
 * Brings the schema to this cordon's version (`migrate`), or only checks it is there (a worker, or
 * `--no-migrate`): one transaction under MIGRATION_LOCK, taken shared for a check, so that a check waits
 * for a migration in progress instead of reading the half of it. Returns the version; throws SchemaError
 * naming both versions when the store is newer, or older and not to be migrated.
 */
export async function migrate(
  client: PoolClient,
  { allowed, migrations = MIGRATIONS }: { allowed: boolean; migrations?: readonly string[] },
): Promise<number> {
  const latest = migrations.length
  await client.query('BEGIN')
  try {
    await client.query(
      allowed ? 'SELECT pg_advisory_xact_lock($1)' : 'SELECT pg_advisory_xact_lock_shared($1)',
      [MIGRATION_LOCK],
    )
    const from = await versionOf(client)
    if (from > latest)
      throw new SchemaError(`the store has schema version ${from}, newer than this cordon (${latest})`)
    if (from < latest && !allowed)
      throw new SchemaError(
        `the store has schema version ${from}; this cordon needs ${latest}: ` +
          'migrate it first (start an API node, which migrates, or upgrade the API nodes first)',
      )
    if (from < latest) {
      await client.query('CREATE TABLE IF NOT EXISTS cordon_schema (version integer NOT NULL)')
      for (let v = from; v < latest; v++) await client.query(migrations[v] as string)
      await client.query('DELETE FROM cordon_schema')
      await client.query('INSERT INTO cordon_schema (version) VALUES ($1)', [latest])
    }
    await client.query('COMMIT')
    return latest
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  }
}
