// A key's ceilings: the most a request made with it may ask. A request over one is refused (403
// `over-ceiling`, naming the field and the ceiling); what a request leaves unset gets the lesser of the
// default and the ceiling.
import type { RunRequest } from './request.js'
import type { KeyRecord } from './types.js'

/**
 * `request` (parsed, defaults applied) within `key`'s ceilings; `raw` is the body as sent, to tell what
 * the client asked from what a default filled in. Throws ServiceError('over-ceiling') naming the field.
 */
export function applyCeilings(_key: KeyRecord, _raw: unknown, request: RunRequest): RunRequest {
  // The first version enforces none: the keys helper fills this in.
  return request
}
