// Reading small kernel-generated files (/proc, cgroups) through an open fd: one syscall per read.
import { readSync } from 'node:fs'

/** Shared by every read: they are synchronous, and these files are a few hundred bytes. */
const buffer = Buffer.alloc(4096)

/**
 * The whole file behind `fd`, read from offset 0 (where /proc and cgroup files are generated afresh);
 * undefined when it cannot be read or does not fit.
 */
export function preadSmall(fd: number): string | undefined {
  try {
    const n = readSync(fd, buffer, 0, buffer.length, 0)
    return n < buffer.length ? buffer.toString('utf8', 0, n) : undefined
  } catch {
    return undefined
  }
}
