// A snapshot of /proc: enough to find a sandbox's processes by uid, session, ancestry or cgroup, and the one
// way cordon signals what it found (signalFound), which checks each is still that process first.
import { closeSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { preadSmall } from './pread.js'

export interface ProcInfo {
  pid: number
  ppid: number
  uid: number
  /** Session id: a process leaves it only by calling setsid. */
  sid: number
  /**
   * When it started (stat field 22, clock ticks since boot). A pid is reused only by a process started
   * later, so pid and start time together name one process for good.
   */
  start: number
  /** Zombies are already dead; they only wait to be reaped. */
  zombie: boolean
  /** Stopped (SIGSTOP) or traced: it runs no code until continued. */
  stopped: boolean
}

/**
 * One process's stat line, read through one fd into a shared buffer (a scan reads every process). The
 * owner comes from the /proc/<pid> directory: the kernel keeps it at the process's uid, while the files
 * inside turn root's when the process makes itself non-dumpable.
 */
export function readProc(pid: number, uid?: number): ProcInfo | null {
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
    // fields[0] is stat's field 3 (the state).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return {
      pid,
      ppid: Number(fields[1]),
      sid: Number(fields[3]),
      uid: owner,
      start: Number(fields[19]),
      zombie: fields[0] === 'Z',
      stopped: fields[0] === 'T' || fields[0] === 't',
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

export function livingByUid(uid: number): ProcInfo[] {
  return listProcesses(uid).filter((p) => !p.zombie)
}

/**
 * Living processes of the session `sid` (cordon starts every launcher as a session leader). Only while
 * that leader is not reaped: once its pid is free, a stranger's setsid can make a session of that id.
 */
export function livingInSession(sid: number): ProcInfo[] {
  return listProcesses().filter((p) => !p.zombie && p.sid === sid)
}

export function isLiving(pid: number): boolean {
  const info = readProc(pid, -1)
  return info !== null && !info.zombie
}

/** Living descendants of `root` (not `root` itself). */
export function livingDescendants(root: number): ProcInfo[] {
  const procs = listProcesses()
  const children = new Map<number, ProcInfo[]>()
  for (const p of procs) {
    const list = children.get(p.ppid) ?? []
    list.push(p)
    children.set(p.ppid, list)
  }
  const out: ProcInfo[] = []
  const queue = [root]
  for (let pid = queue.pop(); pid !== undefined; pid = queue.pop()) {
    for (const child of children.get(pid) ?? []) {
      if (!child.zombie) out.push(child)
      queue.push(child.pid)
    }
  }
  return out
}

/** Whether `pid` is in the cgroup named `name` (its directory's name, unique to one sandbox) in any hierarchy. */
export function inCgroup(pid: number, name: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .some((line) => line.endsWith(`/${name}`))
  } catch {
    return false
  }
}

/** Those of `found` that are still the processes found (see signalFound), as they are now. */
export function stillFound(
  found: readonly ProcInfo[],
  still: (now: ProcInfo, then: ProcInfo) => boolean,
  read: (pid: number) => ProcInfo | null = readProc,
): ProcInfo[] {
  const out: ProcInfo[] = []
  for (const then of found) {
    const now = read(then.pid)
    if (now !== null && !now.zombie && now.start === then.start && still(now, then)) out.push(now)
  }
  return out
}

/** How signalFound reads and signals; tests inject their own. */
export interface ProcIo {
  read(pid: number): ProcInfo | null
  kill(pid: number, sig: NodeJS.Signals): void
}

const realIo: ProcIo = {
  read: (pid) => readProc(pid),
  kill: (pid, sig) => process.kill(pid, sig),
}

/**
 * Signal processes a scan found, each only if it is still the process that was found: alive, the same
 * start time (so its pid was not reused meanwhile), and still matching what it was found by (`still`: its
 * uid, session, parent or cgroup). Every signal cordon sends to a pid it did not spawn itself goes through
 * here. Returns the pids signalled.
 *
 * Node has no pidfd, so a window of a few microseconds remains between this check and kill(2). It is
 * acceptable: for the pid to name someone else by then, the process must exit, be reaped, and the kernel's
 * pid allocator (which hands pids out in a cycle) must come round all of pid_max to that number, tens of
 * thousands of forks in microseconds. Only root can pick a pid (ns_last_pid, clone3's set_tid).
 */
export function signalFound(
  found: readonly ProcInfo[],
  sig: NodeJS.Signals,
  still: (now: ProcInfo, then: ProcInfo) => boolean,
  io: ProcIo = realIo,
): number[] {
  const sent: number[] = []
  for (const then of stillFound(found, still, io.read)) {
    try {
      io.kill(then.pid, sig)
      sent.push(then.pid)
    } catch {
      // Exited since.
    }
  }
  return sent
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
