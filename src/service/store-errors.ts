// When the store cannot write. A full disk (SQLite's SQLITE_FULL, a file's ENOSPC or EDQUOT) is the
// server's state, not the client's fault and not a bug: a request that needs a write then answers 503
// with Retry-After (ServiceError 'store-full'), never 500, and reads go on. Whatever a store failure
// interrupts in a run's life is finished later, never left half done (service.ts).
import { ServiceError } from './types.js'

/** How long a client is told to wait when the store is full: the run filling it is stopped within that. */
export const STORE_FULL_RETRY_S = 10

/** Whether `error` says the store's disk, or SQLite's own bound on the file's size, is full. */
export function isStoreFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT'
}

/** The refusal a request gets for a write the store could not take: 503 with Retry-After. */
export function storeFullError(): ServiceError {
  return new ServiceError(
    'store-full',
    "the server's disk is full: nothing more can be stored now, retry later",
    undefined,
    STORE_FULL_RETRY_S,
  )
}

/**
 * Wraps each method of `service` in place: a full store, thrown or rejected by any of them, becomes
 * ServiceError('store-full'). Every face (HTTP, MCP) then says it the same way.
 */
export function mapStoreFull<T extends object>(service: T): T {
  const methods = service as Record<string, unknown>
  for (const [name, value] of Object.entries(methods)) {
    if (typeof value !== 'function') continue
    const method = value as (...args: unknown[]) => unknown
    methods[name] = (...args: unknown[]) => {
      try {
        const out = method.apply(service, args)
        return out instanceof Promise ? out.catch(rethrow) : out
      } catch (error) {
        return rethrow(error)
      }
    }
  }
  return service
}

function rethrow(error: unknown): never {
  throw isStoreFull(error) ? storeFullError() : error
}

/** What a log line says of an error: its code and message, never a stack full of paths alone. */
export function errorFields(error: unknown): { code?: string; message: string } {
  const code = (error as { code?: unknown } | null)?.code
  const message = error instanceof Error ? error.message : String(error)
  return typeof code === 'string' ? { code, message } : { message }
}
