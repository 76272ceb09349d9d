// What the API shows of a run and of a key: never a run's request (its files, stdin…) or key, never a
// key's hash, webhook secret or secrets' values.
import type { KeyRecord, RunRecord } from '../types.js'

/** A run as the API shows it: never its `request` (files, stdin…) nor its key. */
export function runView(run: RunRecord) {
  return {
    id: run.id,
    state: run.state,
    createdAt: run.createdAt,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    metadata: run.metadata,
    ...(run.result ? { result: run.result } : {}),
  }
}

/** A key as the API shows it: never its hash, its webhook secret or its secrets' values. */
export function keyView(key: KeyRecord) {
  return {
    id: key.id,
    name: key.name,
    scopes: key.scopes,
    ceilings: key.ceilings,
    quota: key.quota,
    secrets: Object.keys(key.secrets),
    retentionMs: key.retentionMs,
    createdAt: key.createdAt,
    revokedAt: key.revokedAt,
  }
}
