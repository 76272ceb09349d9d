// A snapshot of /proc: enough to find a sandbox's processes by uid or by ancestry.
import { closeSync, openSync, readdirSync, statSync } from 'node:fs'
import { preadSmall } from './pread.js'

export interface ProcInfo {
  pid: number
  ppid: number
  uid: number
  /** Session id: a process leaves it only by calling setsid. */
  sid: number
  /** Zombies are already dead; they only wait to be reaped. */
  zombie: boolean
}

/**
 * One process's stat line, read through one fd into a shared buffer (a scan reads every process). The
 * owner comes from the /proc/<pid> directory: the kernel keeps it at the process's uid, while the files
 * inside turn root's when the process makes itself non-dumpable.
 */
function readProc(pid: number, uid?: number): ProcInfo | null {
  let fd: number
  try {
    fd = openSync(`/proc/${pid}/stat`, 'r')
  } catch {
    return null // exited while we looked
  }
  try {
    const owner = uid ?? statSync(`/proc/${pid}`).uid
    const stat = preadSmall(fd)
    if (stat === undefined) return null
    // The command name may contain spaces and parentheses; the fields after the last ')' do not.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return {
      pid,
      ppid: Number(fields[1]),
      sid: Number(fields[3]),
      uid: owner,
      zombie: fields[0] === 'Z',
    }
  } catch {
    return null // exited while we looked
  } finally {
    closeSync(fd)
  }
}

/** All processes, or (much cheaper: one stat per process) only those owned by `uid`. */
export function listProcesses(uid?: number): ProcInfo[] {
  const out: ProcInfo[] = []
  for (const name of readdirSync('/proc')) {
    const pid = Number(name)
    if (!Number.isInteger(pid)) continue
    if (uid !== undefined) {
      try {
        if (statSync(`/proc/${pid}`).uid !== uid) continue
      } catch {
        continue
      }
    }
    const info = readProc(pid, uid)
    if (info) out.push(info)
  }
  return out
}

export function livingByUid(uid: number): number[] {
  return listProcesses(uid)
    .filter((p) => !p.zombie)
    .map((p) => p.pid)
}

/** Living processes of the session `sid` (cordon starts every launcher as a session leader). */
export function livingInSession(sid: number): number[] {
  return listProcesses()
    .filter((p) => !p.zombie && p.sid === sid)
    .map((p) => p.pid)
}

export function isLiving(pid: number): boolean {
  const info = readProc(pid, -1)
  return info !== null && !info.zombie
}

/** Living descendants of `root` (not `root` itself). */
export function livingDescendants(root: number): number[] {
  const procs = listProcesses()
  const children = new Map<number, ProcInfo[]>()
  for (const p of procs) {
    const list = children.get(p.ppid) ?? []
    list.push(p)
    children.set(p.ppid, list)
  }
  const out: number[] = []
  const queue = [root]
  for (let pid = queue.pop(); pid !== undefined; pid = queue.pop()) {
    for (const child of children.get(pid) ?? []) {
      if (!child.zombie) out.push(child.pid)
      queue.push(child.pid)
    }
  }
  return out
}

export function signal(pids: readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig)
    } catch {
      // Already gone.
    }
  }
}

/** Whether a process with this pid exists (zombies included). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
