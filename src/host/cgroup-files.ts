// Pure cgroup builders: which files to write for a sandbox's limits, and how to read the kernel's
// counters back. v2 (unified) and v1 (one hierarchy per controller) differ only in file names.

export type CgroupVersion = 1 | 2

/** The limits a cgroup enforces (a policy's `limits` has them). */
export interface CgroupLimits {
  memoryBytes: number
  maxProcesses: number
}
/** v1 controllers cordon uses; v2 has them all in one directory. */
export const V1_CONTROLLERS = ['memory', 'pids', 'cpuacct'] as const
export type V1Controller = (typeof V1_CONTROLLERS)[number]

export interface CgroupWrite {
  /** v1: the controller whose directory holds the file; v2: always 'unified'. */
  controller: V1Controller | 'unified'
  file: string
  value: string
}

/**
 * Writes that apply the limits. `extraProcesses` are the tier's own helpers (bwrap's monitor and init)
 * inside the cgroup. Swap is off so the memory limit is the memory the sandbox gets.
 */
export function cgroupWrites(
  version: CgroupVersion,
  limits: CgroupLimits,
  extraProcesses: number,
): CgroupWrite[] {
  const pids = pidsLimit(version, limits, extraProcesses)
  if (version === 2) {
    return [
      ...memoryLimit(2, limits.memoryBytes),
      { controller: 'unified', file: 'memory.swap.max', value: '0' },
      // An OOM kill takes the whole sandbox, not one process chosen from it.
      { controller: 'unified', file: 'memory.oom.group', value: '1' },
      pids,
    ]
  }
  return [
    ...memoryLimit(1, limits.memoryBytes),
    { controller: 'memory', file: 'memory.swappiness', value: '0' },
    tcpMemoryLimit(limits.memoryBytes),
    pids,
  ]
}

/** The memory limit alone (v1: limit_in_bytes, then memsw, which must never be below it). */
export function memoryLimit(version: CgroupVersion, bytes: number): CgroupWrite[] {
  const value = String(bytes)
  if (version === 2) return [{ controller: 'unified', file: 'memory.max', value }]
  return [
    { controller: 'memory', file: 'memory.limit_in_bytes', value },
    { controller: 'memory', file: 'memory.memsw.limit_in_bytes', value },
  ]
}

/**
 * v1 leaves TCP buffers uncharged (a 64M sandbox queued 1 GiB on connections to itself) until this file is
 * written: from then on every socket made in the cgroup charges a counter of its own, beside
 * memory.limit_in_bytes, and allocations past it fail (the sender sees EAGAIN, the peer drops). Written
 * before launch, as the kernel decides at each socket's creation. Set to the memory limit: a sandbox holds
 * at most twice memoryBytes (plus each socket's few-KB minimum), and a program that needs big buffers gets
 * as much room for them as for memory. v2 charges socket memory to memory.max itself; unix sockets'
 * buffers are charged to the memory limit on both.
 */
export function tcpMemoryLimit(bytes: number): CgroupWrite {
  return { controller: 'memory', file: 'memory.kmem.tcp.limit_in_bytes', value: String(bytes) }
}

/** The pids.max write alone: the program's processes plus the tier's own in the cgroup. */
export function pidsLimit(version: CgroupVersion, limits: CgroupLimits, extraProcesses: number): CgroupWrite {
  const value = String(limits.maxProcesses + extraProcesses)
  return { controller: version === 2 ? 'unified' : 'pids', file: 'pids.max', value }
}

/** Files read at the end of a run, per controller. */
export function usageFiles(version: CgroupVersion): { controller: V1Controller | 'unified'; file: string }[] {
  if (version === 2) {
    return ['cpu.stat', 'memory.peak', 'memory.events', 'pids.events'].map((file) => ({
      controller: 'unified',
      file,
    }))
  }
  return [
    { controller: 'cpuacct', file: 'cpuacct.usage' },
    { controller: 'memory', file: 'memory.max_usage_in_bytes' },
    { controller: 'memory', file: 'memory.oom_control' },
    { controller: 'pids', file: 'pids.events' },
  ]
}

/** `key value` lines (memory.events, cpu.stat, pids.events, memory.oom_control) → numbers. */
export function parseFlatKeyed(text: string): Record<string, number> {
  const out: Record<string, number> = {}
  for (const line of text.split('\n')) {
    const [key, value] = line.trim().split(/\s+/)
    if (key && value !== undefined && /^\d+$/.test(value)) out[key] = Number(value)
  }
  return out
}

export interface CgroupUsage {
  cpuMs: number | null
  maxRssBytes: number | null
  /** Processes the kernel's OOM killer killed in this cgroup. */
  oomKills: number
  /** Forks refused because pids.max was reached. */
  pidsMaxHits: number
}

const num = (text: string | undefined) => (text !== undefined && /^\d+\s*$/.test(text) ? Number(text) : null)

/** Interpret the files named by `usageFiles` (contents keyed by file name; missing ones are undefined). */
export function parseUsage(version: CgroupVersion, files: Record<string, string | undefined>): CgroupUsage {
  const pidsMaxHits = parseFlatKeyed(files['pids.events'] ?? '').max ?? 0
  if (version === 2) {
    const usec = parseFlatKeyed(files['cpu.stat'] ?? '').usage_usec
    return {
      cpuMs: usec === undefined ? null : Math.round(usec / 1000),
      maxRssBytes: num(files['memory.peak']),
      oomKills: parseFlatKeyed(files['memory.events'] ?? '').oom_kill ?? 0,
      pidsMaxHits,
    }
  }
  const ns = num(files['cpuacct.usage'])
  return {
    cpuMs: ns === null ? null : Math.round(ns / 1e6),
    maxRssBytes: num(files['memory.max_usage_in_bytes']),
    oomKills: parseFlatKeyed(files['memory.oom_control'] ?? '').oom_kill ?? 0,
    pidsMaxHits,
  }
}

/** The file whose value is the CPU time so far, polled to enforce cpuTimeMs on the whole tree. */
export function cpuUsageMs(version: CgroupVersion, text: string): number | null {
  if (version === 2) {
    const usec = parseFlatKeyed(text).usage_usec
    return usec === undefined ? null : usec / 1000
  }
  const ns = num(text)
  return ns === null ? null : ns / 1e6
}
