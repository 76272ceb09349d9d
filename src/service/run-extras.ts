// What the service offers a dashboard beside the Service contract: what a key may ask (its allowance), a
// run's request as its page shows it, a run made again from its stored request, and the runs' feed. Each
// checks the key as the service's own methods do: its scope, and its own runs unless it is admin (a run
// of another key is `404`); a run is made again only by the key that made it.
import { type Allowance, keyAllowance } from './allowance.js'
import type { ServerLimitCeilings } from './ceilings.js'
import type { HostOptions, RunRequest } from './request.js'
import type { RunFeed } from './run-feed.js'
import { type ShownRequest, shownRequest } from './shown.js'
import { type KeyRecord, type RunRecord, type Service, ServiceError, type Store } from './types.js'

export interface RunExtras {
  /** What `key` may ask for: its limits' defaults and most, its network modes, its tier, its rootfs. */
  allowance(key: KeyRecord): Allowance
  /** A run's request as its page shows it (runs:read; its own, or any for an admin). */
  shownRequest(key: KeyRecord, id: string): ShownRequest
  /**
   * A new run of the stored request of run `id`, as `key` submitted it (runs:write; only the key that made
   * that run, admin or not): its files, stdin, env and redact too, which the page never sees.
   */
  rerun(key: KeyRecord, id: string): RunRecord
  /** The runs' state changes, live and resumable. */
  readonly feed: RunFeed
}

export interface RunExtrasDeps {
  store: Pick<Store, 'getRun' | 'getKey' | 'runRequest' | 'runKeyId'>
  submit: Service['submit']
  feed: RunFeed
  limitCeilings: ServerLimitCeilings
  host?: HostOptions
}

const isAdmin = (key: KeyRecord) => key.scopes.includes('admin')

function need(key: KeyRecord, scope: 'runs:read' | 'runs:write'): void {
  if (key.revokedAt !== null) throw new ServiceError('unauthorized', 'this key was revoked')
  if (!key.scopes.includes(scope) && !isAdmin(key))
    throw new ServiceError('forbidden', `this key lacks the ${scope} scope`)
}

export function runExtras(deps: RunExtrasDeps): RunExtras {
  const { store } = deps
  return {
    feed: deps.feed,

    allowance(key) {
      if (key.revokedAt !== null) throw new ServiceError('unauthorized', 'this key was revoked')
      return keyAllowance(key, deps.limitCeilings)
    },

    shownRequest(key, id) {
      need(key, 'runs:read')
      const run = store.getRun(id)
      if (!run || (run.keyId !== key.id && !isAdmin(key))) throw new ServiceError('not-found', `no run ${id}`)
      const request = store.runRequest(id) as RunRequest | null
      if (!request) throw new ServiceError('not-found', `no run ${id}`)
      // Redacted as the run was: by its own key's secrets, whoever reads it.
      const owner = store.getKey(run.keyId) ?? { ...key, secrets: {} }
      return shownRequest(request, run.cmd, owner, deps.host)
    },

    rerun(key, id) {
      need(key, 'runs:write')
      const owner = store.runKeyId(id)
      if (owner === null || (owner !== key.id && !isAdmin(key)))
        throw new ServiceError('not-found', `no run ${id}`)
      // An admin may read another key's run, not make one with its request: it would run with the admin's
      // ceilings and secrets, and hold what that key's own request never could.
      if (owner !== key.id)
        throw new ServiceError(
          'forbidden',
          `run ${id} is another key's: only the key that made it may run it again`,
        )
      const request = store.runRequest(id) as (RunRequest & { wait?: unknown }) | null
      if (!request) throw new ServiceError('not-found', `no run ${id}`)
      // As it was stored (validated, within the key's ceilings), validated and bounded again: the key's
      // ceilings and the server's may have changed since, and a refusal names the field as any would.
      const { wait: _wait, ...body } = request
      return deps.submit(key, body)
    },
  }
}
