// The keys, managed from the command line (`cordon keys …`) on the service's data dir, whether or not a
// server runs on it: only the store is opened (SQLite in WAL mode takes a second writer), never the queue,
// which would take over the running server's runs.
import path from 'node:path'
import { keyView } from './http/views.js'
import { newKeyRecord } from './key-schema.js'
import { defaultDataDir } from './paths.js'
import { SqliteSyncStore } from './sqlite-sync.js'
import { type KeyRecord, ServiceError } from './types.js'

export interface KeyAdmin {
  /** A new key from a `POST /v1/keys` body; the key itself is returned this once. */
  create(body: unknown): { record: KeyRecord; key: string }
  list(): KeyRecord[]
  revoke(id: string): void
  view: typeof keyView
  close(): void
}

export function openKeyAdmin(dataDir?: string): KeyAdmin {
  const store = new SqliteSyncStore(path.resolve(dataDir ?? defaultDataDir()))
  return {
    create(body) {
      const made = newKeyRecord(body)
      store.createKey(made.record)
      return made
    },
    list: () => store.listKeys(),
    revoke(id) {
      if (!store.revokeKey(id, new Date().toISOString()))
        throw new ServiceError('not-found', `no active key ${id}`)
    },
    view: keyView,
    close: () => store.close(),
  }
}
