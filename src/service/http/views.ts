// What the API shows of a key: never its hash, webhook secret or secrets' values. (A run's view is
// types.ts's runView, which webhooks send too.)
import type { KeyRecord } from '../types.js'

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
