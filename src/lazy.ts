// What the CLI does not need on its way to a plain `cordon run` is loaded at first use: each Node builtin
// below costs 1.5-3.5 ms to load, paid by every start of the CLI (agents start it once per command).
import { createRequire } from 'node:module'

const load = createRequire(import.meta.url)

/** `id` (a Node builtin or a package), required the first time the returned function is called. */
export function lazy<T>(id: string): () => T {
  let loaded: T | undefined
  return () => {
    loaded ??= load(id) as T
    return loaded
  }
}

/** Milliseconds on a monotonic clock, like `performance.now()` without loading perf_hooks. */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6
}
