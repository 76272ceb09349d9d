// What the CLI does not need on its way to a plain `cordon run` is loaded at first use: each Node builtin
// below costs 1.5-3.5 ms to load, paid by every start of the CLI (agents start it once per command).
import { closeSync, openSync, readSync } from 'node:fs'
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

/**
 * `bytes` random bytes from the kernel, as hex: names a sandbox's cgroup and scratch directory so no one
 * can guess them ahead, without loading node:crypto (~4 ms of every CLI start) for it.
 */
export function randomHex(bytes: number): string {
  const buf = Buffer.alloc(bytes)
  const fd = openSync('/dev/urandom', 'r')
  try {
    if (readSync(fd, buf) !== bytes) throw new Error('cordon: short read from /dev/urandom')
  } finally {
    closeSync(fd)
  }
  return buf.toString('hex')
}
