// Which cgroup hierarchies this machine offers and where this process sits in them.
import {
  accessSync,
  constants,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { randomHex } from '../lazy.js'
import { V1_CONTROLLERS, type V1Controller } from './cgroup-files.js'

export interface CgroupInfo {
  /** Mount point of the unified (v2) hierarchy and the controllers it delegates, if mounted. */
  v2: { mount: string; controllers: string[] } | null
  /** v1 controllers mounted, each with its mount point. */
  v1: Record<string, string>
  /** This process's cgroup path per v1 controller (and '' for v2). */
  own: Record<string, string>
  /** Every cgroup mount has favordynmods: moving a process in does not wait for an RCU grace period. */
  favordynmods: boolean
}

function read(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

export function detectCgroups(): CgroupInfo {
  let v2: CgroupInfo['v2'] = null
  const v1: Record<string, string> = {}
  let favordynmods = true
  for (const line of read('/proc/self/mountinfo').split('\n')) {
    const [left, right] = line.split(' - ')
    if (!left || !right) continue
    const mount = left.split(' ')[4]!
    const [fstype, , superOpts = ''] = right.split(' ')
    if (fstype === 'cgroup' || fstype === 'cgroup2')
      favordynmods &&= superOpts.split(',').includes('favordynmods')
    if (fstype === 'cgroup2') {
      v2 = { mount, controllers: read(`${mount}/cgroup.controllers`).trim().split(/\s+/).filter(Boolean) }
    } else if (fstype === 'cgroup') {
      for (const opt of superOpts.split(',')) {
        if (['memory', 'pids', 'cpuacct', 'cpu'].includes(opt)) v1[opt] = mount
      }
    }
  }
  return { v2, v1, own: parseOwnCgroups(read('/proc/self/cgroup')), favordynmods }
}

/** /proc/<pid>/cgroup → path per v1 controller ('' for v2), e.g. `4:memory:/a` → { memory: '/a' }. */
export function parseOwnCgroups(text: string): Record<string, string> {
  const own: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const [, controllers, path] = line.split(':')
    if (controllers === undefined || path === undefined) continue
    for (const c of controllers === '' ? [''] : controllers.split(',')) own[c] = path
  }
  return own
}

export type CgroupSupport =
  | { version: 2; parent: string; mount: string }
  | {
      version: 1
      parents: Record<V1Controller, string>
      /** Each controller's mount point, e.g. /sys/fs/cgroup/cpu,cpuacct. */
      mounts: Record<V1Controller, string>
      /** Symlinks beside the mount points that name them (cpuacct -> cpu,cpuacct), as `at` -> `target`. */
      links: { at: string; target: string }[]
    }
  | { version: null; reason: string }

/** Symlinks in the directories holding `mounts` that point at one of them by name (cpuacct -> cpu,cpuacct). */
function linksTo(mounts: readonly string[]): { at: string; target: string }[] {
  const out: { at: string; target: string }[] = []
  for (const dir of new Set(mounts.map((m) => path.dirname(m)))) {
    let names: string[]
    try {
      names = readdirSync(dir)
    } catch {
      continue
    }
    for (const name of names) {
      try {
        const target = readlinkSync(path.join(dir, name))
        if (mounts.includes(path.resolve(dir, target))) out.push({ at: path.join(dir, name), target })
      } catch {
        // Not a symlink.
      }
    }
  }
  return out
}

/** A directory inside a hierarchy mounted at `mount`, without a trailing slash. */
const inside = (mount: string, sub: string) => path.join(mount, sub).replace(/(.)\/$/, '$1')

function writableDir(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK)
    return statSync(dir).isDirectory()
  } catch {
    return false
  }
}

/**
 * Where sandbox cgroups can be created: under `parent` (a path inside the hierarchy, e.g. '/cordon') or
 * else under the cgroup this process is in. v2 is preferred when it has the memory and pids controllers.
 */
export function cgroupSupport(info: CgroupInfo = detectCgroups(), parent?: string): CgroupSupport {
  const reasons: string[] = []
  if (info.v2) {
    const dir = inside(info.v2.mount, parent ?? info.own[''] ?? '/')
    const available = read(path.join(dir, 'cgroup.controllers')).split(/\s+/)
    const missing = ['memory', 'pids'].filter((c) => !available.includes(c))
    if (missing.length) reasons.push(`v2 at ${dir} lacks ${missing.join(', ')}`)
    else if (!writableDir(dir)) reasons.push(`v2 ${dir} is not writable`)
    else if (enableV2Controllers(dir, available)) return { version: 2, parent: dir, mount: info.v2.mount }
    else reasons.push(`v2 ${dir} holds processes, so it cannot delegate controllers (set cgroupParent)`)
  }
  const missingV1 = V1_CONTROLLERS.filter((c) => !info.v1[c])
  if (missingV1.length === 0) {
    const parents = Object.fromEntries(
      V1_CONTROLLERS.map((c) => [c, inside(info.v1[c]!, parent ?? info.own[c] ?? '/')]),
    ) as Record<V1Controller, string>
    const unwritable = V1_CONTROLLERS.filter((c) => !writableDir(parents[c]))
    if (unwritable.length === 0) {
      const mounts = Object.fromEntries(V1_CONTROLLERS.map((c) => [c, info.v1[c]!])) as Record<
        V1Controller,
        string
      >
      return { version: 1, parents, mounts, links: linksTo(Object.values(mounts)) }
    }
    reasons.push(`v1 ${unwritable.map((c) => parents[c]).join(', ')} not writable`)
  } else if (Object.keys(info.v1).length) {
    reasons.push(`v1 lacks ${missingV1.join(', ')}`)
  }
  if (!info.v2 && Object.keys(info.v1).length === 0) reasons.push('no cgroup filesystem is mounted')
  return { version: null, reason: reasons.join('; ') }
}

/** Make memory, pids and cpu available to child cgroups of `dir`; false when the kernel refuses. */
function enableV2Controllers(dir: string, available: string[]): boolean {
  const enabled = read(path.join(dir, 'cgroup.subtree_control')).split(/\s+/)
  const wanted = ['memory', 'pids', 'cpu'].filter((c) => available.includes(c) && !enabled.includes(c))
  if (wanted.length === 0) return true
  try {
    writeFileSync(path.join(dir, 'cgroup.subtree_control'), wanted.map((c) => `+${c}`).join(' '))
    return true
  } catch {
    return false
  }
}

/** Sandbox cgroups are named after the cordon process that made them, so a dead owner's are found. */
export const CGROUP_PREFIX = 'cordon-'

export function sandboxCgroupName(): string {
  return `${CGROUP_PREFIX}${process.pid}-${randomHex(4)}`
}

export type CgroupController = V1Controller | 'unified'

/** The sandbox's cgroup directories, by controller (v1: one per hierarchy, each a mkdir, a join and an rmdir). */
export function cgroupDirs(
  support: Exclude<CgroupSupport, { version: null }>,
  name: string,
): Map<CgroupController, string> {
  if (support.version === 2) return new Map([['unified', path.join(support.parent, name)]])
  return new Map(V1_CONTROLLERS.map((c) => [c, path.join(support.parents[c], name)]))
}

/** The files a process writes 0 into to join the cgroup itself (v1: its thread, which is all a launcher has). */
export function joinFiles(version: 1 | 2, dirs: ReadonlyMap<CgroupController, string>): string[] {
  return [...dirs.values()].map((dir) => path.join(dir, version === 2 ? 'cgroup.procs' : 'tasks'))
}

/**
 * What the namespace tier shows at /sys/fs/cgroup: the sandbox's own directories at their hierarchies'
 * mount points (and the links that name those); nothing without a cgroup.
 */
export function ownCgroupView(
  cgroup: {
    support: Exclude<CgroupSupport, { version: null }>
    dirs: ReadonlyMap<CgroupController, string>
  } | null,
): { binds: { source: string; dest: string }[]; links: { at: string; target: string }[] } {
  if (!cgroup) return { binds: [], links: [] }
  const { support, dirs } = cgroup
  if (support.version === 2)
    return { binds: [{ source: dirs.get('unified')!, dest: support.mount }], links: [] }
  return {
    binds: [...dirs].map(([c, dir]) => ({ source: dir, dest: support.mounts[c as V1Controller] })),
    links: support.links,
  }
}
