// Which cgroup hierarchies this machine offers and where this process sits in them.
import { readFileSync } from 'node:fs'

export interface CgroupInfo {
  /** Mount point of the unified (v2) hierarchy and the controllers it delegates, if mounted. */
  v2: { mount: string; controllers: string[] } | null
  /** v1 controllers mounted, each with its mount point. */
  v1: Record<string, string>
  /** This process's cgroup path per v1 controller (and '' for v2). */
  own: Record<string, string>
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
  for (const line of read('/proc/self/mountinfo').split('\n')) {
    const [left, right] = line.split(' - ')
    if (!left || !right) continue
    const mount = left.split(' ')[4]!
    const [fstype, , superOpts = ''] = right.split(' ')
    if (fstype === 'cgroup2') {
      v2 = { mount, controllers: read(`${mount}/cgroup.controllers`).trim().split(/\s+/).filter(Boolean) }
    } else if (fstype === 'cgroup') {
      for (const opt of superOpts.split(',')) {
        if (['memory', 'pids', 'cpuacct', 'cpu', 'freezer'].includes(opt)) v1[opt] = mount
      }
    }
  }
  const own: Record<string, string> = {}
  for (const line of read('/proc/self/cgroup').split('\n')) {
    const [, controllers, path] = line.split(':')
    if (controllers === undefined || path === undefined) continue
    for (const c of controllers === '' ? [''] : controllers.split(',')) own[c] = path
  }
  return { v2, v1, own }
}
