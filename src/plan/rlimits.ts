// rlimits in util-linux `prlimit` syntax, which cordon's launcher reads. Memory uses RLIMIT_DATA, not RLIMIT_AS: V8, the JVM and Go
// reserve large virtual ranges up front and would not even start under an address-space limit.
import type { Limits } from '../policy/schema.js'

/**
 * What RLIMIT_DATA allows beyond memoryBytes, when no cgroup holds the sandbox's memory: it counts every
 * writable private mapping, and runtimes reserve some at start that they never fill — Node 24 has ~560 MiB
 * of data mappings before it runs a line (its V8 code range), so under a 512 MiB data limit it could not
 * start at all. A process is still bounded, at memoryBytes plus this; only a cgroup bounds the sandbox.
 */
export const DATA_RESERVE_BYTES = 1024 * 1024 * 1024

export interface RlimitOptions {
  /** RLIMIT_NPROC counts per uid machine-wide, so it is only meaningful when the sandbox has a uid of its own. */
  ownUid: boolean
  /** Processes the isolation tier itself adds under the sandbox uid (bwrap's monitor and init). */
  overheadProcesses: number
  /** A cgroup limits memory and processes for the whole tree; rlimits then would only pre-empt its counters. */
  cgroup: boolean
}

export function rlimitArgs(limits: Limits, opts: RlimitOptions): string[] {
  const cpuSeconds = Math.max(1, Math.ceil(limits.cpuTimeMs / 1000))
  const args = [
    // SIGXCPU at the soft limit, SIGKILL one second later for programs that catch it.
    `--cpu=${cpuSeconds}:${cpuSeconds + 1}`,
    `--fsize=${limits.maxFileSizeBytes}`,
    // 1, not 0: with a core_pattern that pipes to a handler (systemd-coredump, apport) the kernel ignores
    // RLIMIT_CORE and runs it, as root outside the sandbox's cgroup, on the whole dump (its memory, its
    // environment) unless the limit is exactly 1; a file dump needs at least a page, so 1 writes none.
    '--core=1',
    // No cgroup counts open files: without this, two sandboxes filled the host's whole file table.
    `--nofile=${limits.maxOpenFiles}`,
  ]
  if (opts.cgroup) return args
  args.push(`--data=${limits.memoryBytes + DATA_RESERVE_BYTES}`)
  if (opts.ownUid) args.push(`--nproc=${limits.maxProcesses + opts.overheadProcesses}`)
  return args
}
