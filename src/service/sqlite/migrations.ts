// The SQLite store's schema, as the migrations that made it: each entry takes the schema from version i
// to i+1. Never edit one that shipped: append.
/** Each entry takes the schema from version i to i+1; never edit one that shipped, append. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE runs (
     id TEXT PRIMARY KEY,
     key_id TEXT NOT NULL,
     state TEXT NOT NULL,
     status TEXT,
     created_at TEXT NOT NULL,
     started_at TEXT,
     finished_at TEXT,
     metadata TEXT NOT NULL,
     request TEXT NOT NULL,
     result TEXT
   );
   CREATE INDEX runs_by_created ON runs (created_at, id);
   CREATE INDEX runs_by_key ON runs (key_id, created_at, id);
   CREATE INDEX runs_by_state ON runs (state, created_at);
   CREATE TABLE events (
     run_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     type TEXT NOT NULL,
     at TEXT NOT NULL,
     data TEXT NOT NULL,
     PRIMARY KEY (run_id, seq)
   ) WITHOUT ROWID;
   CREATE TABLE keys (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     hash TEXT NOT NULL UNIQUE,
     scopes TEXT NOT NULL,
     ceilings TEXT NOT NULL,
     quota TEXT NOT NULL,
     secrets TEXT NOT NULL,
     retention_ms INTEGER,
     webhook_secret TEXT NOT NULL,
     created_at TEXT NOT NULL,
     revoked_at TEXT
   );`,
  `CREATE TABLE webhook_attempts (
     run_id TEXT NOT NULL,
     attempt INTEGER NOT NULL,
     at TEXT NOT NULL,
     status INTEGER,
     error TEXT,
     duration_ms INTEGER NOT NULL,
     PRIMARY KEY (run_id, attempt)
   ) WITHOUT ROWID;`,
  // Where each output event's bytes end, in its stream and in both interleaved: /output finds the few
  // events a range needs by index instead of reading the run's whole history. Old events are filled in.
  `ALTER TABLE events ADD COLUMN out_stream TEXT;
   ALTER TABLE events ADD COLUMN out_end INTEGER;
   ALTER TABLE events ADD COLUMN merged_end INTEGER;
   UPDATE events SET out_stream = json_extract(data, '$.stream'),
                     out_end = json_extract(data, '$.offset') + json_extract(data, '$.bytes')
     WHERE type = 'output';
   UPDATE events SET merged_end = m.e FROM (
       SELECT run_id AS r, seq AS s,
              SUM(json_extract(data, '$.bytes')) OVER (PARTITION BY run_id ORDER BY seq) AS e
         FROM events WHERE type = 'output'
     ) AS m
     WHERE events.run_id = m.r AND events.seq = m.s;
   CREATE INDEX events_by_stream_end ON events (run_id, out_stream, out_end) WHERE out_stream IS NOT NULL;
   CREATE INDEX events_by_merged_end ON events (run_id, merged_end) WHERE merged_end IS NOT NULL;`,
  // A finished run's webhook delivery not over yet: the attempt to make next and when. It survives a
  // restart, which resumes it; a row is written in the transaction that finishes the run.
  `CREATE TABLE webhook_pending (
     run_id TEXT PRIMARY KEY,
     attempt INTEGER NOT NULL,
     at TEXT NOT NULL
   ) WITHOUT ROWID;`,
  // An `end` event carries the result without what the run's events carried (types.ts endResult): the
  // stored ones lose their copies of the output, logs and connections.
  `UPDATE events SET data = json_object('result', json_remove(json_extract(data, '$.result'),
       '$.stdout', '$.stderr', '$.output', '$.logs', '$.network'))
     WHERE type = 'end' AND json_type(data, '$.result') = 'object';`,
  // A run's output is kept once, as bytes: an output event's in `bytes` (its data no longer holds them as
  // base64), and a finished run's result without its text when `text_from_events` (text.ts rebuilds it
  // from the events). `summary` is the result without what its events carry (an EndResult), and `cmd`
  // the request's command: what reads that need neither the output nor the request (up to 8 MiB of files)
  // load. `view_bytes`: how long its result is as JSON, text included, so that a view is budgeted before
  // it is read. Older rows keep their whole result.
  `ALTER TABLE events ADD COLUMN bytes BLOB;
   ALTER TABLE runs ADD COLUMN summary TEXT;
   ALTER TABLE runs ADD COLUMN text_from_events INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE runs ADD COLUMN view_bytes INTEGER;
   ALTER TABLE runs ADD COLUMN cmd TEXT NOT NULL DEFAULT '[]';
   UPDATE runs SET cmd = coalesce(json_extract(request, '$.cmd'), '[]')
     WHERE json_type(request, '$.cmd') = 'array';
   UPDATE runs SET summary = json_remove(result, '$.stdout', '$.stderr', '$.output', '$.logs', '$.network'),
                   view_bytes = octet_length(result)
     WHERE result IS NOT NULL;`,
  // What a client wrote to a queued run's stdin (null data: it closed it), kept until the run starts:
  // stored before the write is acknowledged, so a crash loses none of it (it lived in memory), and held
  // on disk rather than in the server's memory while the run waits.
  `CREATE TABLE stdin (
     run_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     data BLOB,
     PRIMARY KEY (run_id, seq)
   ) WITHOUT ROWID;`,
  // The store as the contract of store.ts has it, for one machine and many: who runs a run (its worker and
  // attempt, the fence every later write carries; its lease, by the store's clock in ms), a cancel asked,
  // the runs a key was admitted a minute (a table of its own: deleting a run refunds nothing), stdin kept
  // until its worker wrote it into the sandbox (numbered per run by `stdin_seq`, as acked chunks go; `stdin`:
  // 'open' while it takes writes, 'closed' once ended), the workers, and webhook deliveries claimed by a node.
  `ALTER TABLE runs ADD COLUMN worker_id TEXT;
   ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE runs ADD COLUMN lease_until INTEGER;
   ALTER TABLE runs ADD COLUMN cancel_requested_at TEXT;
   ALTER TABLE runs ADD COLUMN stdin TEXT;
   ALTER TABLE runs ADD COLUMN stdin_seq INTEGER NOT NULL DEFAULT 0;
   UPDATE runs SET stdin = CASE
       WHEN EXISTS (SELECT 1 FROM stdin s WHERE s.run_id = runs.id AND s.data IS NULL) THEN 'closed'
       ELSE 'open' END
     WHERE state <> 'finished' AND json_extract(request, '$.stdin') = 'open';
   UPDATE runs SET stdin_seq = (SELECT MAX(seq) FROM stdin s WHERE s.run_id = runs.id)
     WHERE id IN (SELECT run_id FROM stdin);
   CREATE INDEX runs_active_by_key ON runs (key_id) WHERE state <> 'finished';
   CREATE INDEX runs_by_worker ON runs (worker_id) WHERE state = 'running';
   CREATE TABLE key_admissions (key_id TEXT NOT NULL, at INTEGER NOT NULL);
   CREATE INDEX key_admissions_by_key ON key_admissions (key_id, at);
   CREATE TABLE workers (
     id TEXT PRIMARY KEY,
     host TEXT NOT NULL,
     pid INTEGER NOT NULL,
     version TEXT NOT NULL,
     concurrency INTEGER NOT NULL,
     started_at TEXT NOT NULL,
     heartbeat_at TEXT NOT NULL,
     draining INTEGER NOT NULL DEFAULT 0
   ) WITHOUT ROWID;
   ALTER TABLE webhook_pending ADD COLUMN claimed_by TEXT;
   ALTER TABLE webhook_pending ADD COLUMN claimed_until INTEGER;`,
]
