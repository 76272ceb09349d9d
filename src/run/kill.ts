// Finding and stopping every process of one sandbox. The namespace tier's hard stop is atomic: killing
// bwrap's monitor takes down its PID namespace. The process tier relies on the sandbox's own uid (or
// cgroup), so processes that left the session (setsid) are still found; without either, setsid is refused
// and the session is what marks them.
//
// pid_max is small (32768 here) and pids come round again: nothing is signalled by a pid cordon has not
// just checked is the sandbox's (signalFound), a uid only while this run holds it, and a session only
// while its leader is not reaped (after that a stranger's setsid can make a session of the same id).
import type { Readable } from 'node:stream'
import {
  livingByUid,
  livingDescendants,
  livingInSession,
  type ProcInfo,
  readProc,
  signalFound,
  stillFound,
} from '../host/procs.js'

export interface SandboxProcesses {
  /**
   * SIGTERM to every program in the sandbox (not to bwrap itself, which would kill without grace); false
   * when no program runs yet, so the caller asks again (killing bwrap mid-set-up could orphan its init).
   */
  term(): boolean
  /** SIGKILL the whole sandbox. */
  kill(): void
  /** Processes of the sandbox still alive. */
  survivors(): number[]
}

/**
 * The process cordon spawned: the launcher, which becomes bwrap's monitor or stays as the program's.
 * Signalled through its ChildProcess (or SpawnedProcess), which never signals a pid it has already reaped
 * (and so might belong to someone else); `gone` turns true exactly when it is reaped.
 */
export interface Leader {
  pid: number
  /** It has exited (the supervisor saw it; asking the kernel about a dead pid costs a thrown ESRCH, ~100 µs). */
  gone(): boolean
  signal(sig: NodeJS.Signals): void
}

/** The sandbox's own uid, and whether this run still holds it: once given back, it may be another run's. */
export interface UidMark {
  uid: number
  held(): boolean
}

/**
 * `list`, read until it comes back empty after the leader is gone: from then on nothing can bring a
 * sandbox process back, so the empty answer is not asked for again.
 */
function finalWhenEmpty(leader: Leader, list: () => ProcInfo[]): () => ProcInfo[] {
  let over = false
  return () => {
    if (over) return []
    const found = list()
    over = found.length === 0 && leader.gone()
    return found
  }
}

/** Every process of `uid`, while the run holds it (after that, none of them is this run's). */
function byUid(mark: UidMark): { list(): ProcInfo[]; still(now: ProcInfo): boolean } {
  return {
    list: () => (mark.held() ? livingByUid(mark.uid) : []),
    still: (now) => mark.held() && now.uid === mark.uid,
  }
}

const pids = (found: readonly ProcInfo[]) => found.map((p) => p.pid)

/** How long a hard stop waits for a paused bwrap monitor to stop (see `pause`). */
const PAUSE_MS = 100

/**
 * SIGSTOP the leader and wait (briefly, synchronously) until it has stopped: a stopped process clones no
 * more, so a look at its children then finds every one it will ever have.
 */
function pause(leader: Leader): void {
  leader.signal('SIGSTOP')
  const until = performance.now() + PAUSE_MS
  while (performance.now() < until) {
    const now = readProc(leader.pid, -1)
    if (now === null || now.zombie || now.stopped) return
  }
}

/**
 * Follow bwrap's --json-status-fd: `onInit` gets the host pid of bwrap's init; `programRan` says whether
 * bwrap reported the program's exit, which it does only once it has run the program.
 */
export function watchStatus(
  status: Readable | undefined,
  onInit: (pid: number) => void,
): { programRan(): boolean } {
  let text = ''
  let init = false
  status?.setEncoding('utf8')
  status?.on('data', (chunk: string) => {
    text += chunk
    const match = init ? null : /"child-pid"\s*:\s*(\d+)/.exec(text)
    if (!match) return
    init = true
    onInit(Number(match[1]))
  })
  return { programRan: () => /"exit-code"\s*:/.test(text) }
}

/**
 * The namespace tier's processes are bwrap's init and what runs under it. Once the init is gone, the
 * kernel has already killed everything else in its PID namespace. The init arms --die-with-parent only
 * after its clone: if the monitor dies before that, the init lives on, re-parented and holding the output
 * pipes, so `kill` after the monitor is gone goes after it. bwrap reports the init (on its status fd)
 * before it lets the init run; an init never reported never ran, but waits for that go-ahead for ever:
 * cordon's own hard stop pauses the monitor to find it, and otherwise the uid (or the cgroup) does.
 */
export function namespaceProcesses(
  leader: Leader,
  uid: UidMark | null,
): SandboxProcesses & { setInit(pid: number): void } {
  let init: ProcInfo | undefined
  const sameInit = () => true // pid and start time are checked by stillFound
  const findInit = () => {
    if (init === undefined && !leader.gone())
      init = livingDescendants(leader.pid).find((p) => p.ppid === leader.pid)
    return init
  }
  const owned = uid && byUid(uid)
  const initAlive = () => init !== undefined && stillFound([init], sameInit).length > 0
  const survivors = (): number[] => {
    if (init !== undefined) return initAlive() ? [init.pid] : []
    return leader.gone() && owned ? pids(owned.list()) : []
  }
  return {
    // Reported by bwrap moments ago: read now, its start time pins it for every later use.
    setInit(pid) {
      const now = readProc(pid, -1)
      if (init === undefined && now && !now.zombie && (leader.gone() || now.ppid === leader.pid)) init = now
    },
    term() {
      const found = findInit()
      // Its descendants, only while it is still the init found: a stranger's pid has strangers' children.
      const programs = found === undefined || !initAlive() ? [] : livingDescendants(found.pid)
      // One whose parent died since is the init's now (it reaps the namespace's orphans).
      signalFound(programs, 'SIGTERM', (now, then) => now.ppid === then.ppid || now.ppid === found!.pid)
      return programs.length > 0
    },
    kill() {
      if (leader.gone()) {
        if (init !== undefined) signalFound([init], 'SIGKILL', sameInit)
        else if (owned) signalFound(owned.list(), 'SIGKILL', owned.still)
        return
      }
      // Mid-set-up the monitor may be about to clone the init: stopped, it cannot, so the look finds it.
      if (init === undefined) pause(leader)
      findInit()
      leader.signal('SIGKILL')
      if (init !== undefined) signalFound([init], 'SIGKILL', sameInit)
    },
    survivors,
  }
}

/**
 * The process tier: the leader is the launcher's monitor, root and outside the cgroup, which no scan
 * finds. SIGTERM it ignores (the program gets its own); SIGKILL takes the program with it (parent-death
 * signal), also while the program is still being set up, before any scan could find it.
 * - With a uid of its own every sandbox process carries it. Once none is left and the launcher is gone
 *   (before it drops to the uid, it would not be counted), nothing can bring one back, so an empty scan (a
 *   /proc walk: ~0.3 ms) is not repeated.
 * - Without one the session is all there is, and it can be scanned only while the leader is not reaped.
 *   So the monitor (--kill-session) kills the rest of its session itself when the program ends, while it
 *   still holds the session's id, and a hard stop kills the session's processes but not the monitor,
 *   which then does that sweep; only a monitor with nothing else in its session yet is killed outright.
 */
export function processTierProcesses(leader: Leader, uid: UidMark | null): SandboxProcesses {
  if (uid !== null) {
    const owned = byUid(uid)
    const all = finalWhenEmpty(leader, owned.list)
    const send = (sig: NodeJS.Signals) => {
      const others = all().filter((p) => p.pid !== leader.pid)
      if (!leader.gone()) leader.signal(sig)
      signalFound(others, sig, owned.still)
      // Only a sandbox process counts as reached: until one is there, a graceful stop asks again.
      return others.length > 0
    }
    return {
      term: () => send('SIGTERM'),
      kill: () => {
        send('SIGKILL')
      },
      survivors: () => pids(all()),
    }
  }
  const members = () => (leader.gone() ? [] : livingInSession(leader.pid).filter((p) => p.pid !== leader.pid))
  const inSession = (now: ProcInfo) => !leader.gone() && now.sid === leader.pid
  return {
    term() {
      const found = members()
      if (!leader.gone()) leader.signal('SIGTERM')
      signalFound(found, 'SIGTERM', inSession)
      return found.length > 0
    },
    kill() {
      const found = members()
      if (found.length > 0) signalFound(found, 'SIGKILL', inSession)
      else if (!leader.gone()) leader.signal('SIGKILL')
    },
    survivors: () => pids(members()),
  }
}

/** SIGKILL survivors until none are left or `timeoutMs` passes; returns the pids still alive. */
export async function reap(procs: SandboxProcesses, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const alive = procs.survivors()
    if (alive.length === 0 || Date.now() > deadline) return alive
    procs.kill()
    await new Promise((r) => setTimeout(r, 5))
  }
}

/**
 * With a cgroup, its member list is the truth for what is left, and the process tier's hard stop is the
 * cgroup's kill (atomic on v2, passes over its members on v1). The namespace tier keeps killing bwrap's monitor, which tears down the PID namespace.
 * Once the leader is gone and the cgroup is empty, nothing can enter it again (only the launcher joins;
 * sandbox processes cannot write cgroup files), so the empty list is not read again.
 */
export function cgroupProcesses(
  cgroup: { members(): ProcInfo[]; kill(): void },
  base: SandboxProcesses,
  namespace: boolean,
  leader: Leader,
): SandboxProcesses {
  const members = finalWhenEmpty(leader, () => cgroup.members())
  return {
    term: () => base.term(),
    kill() {
      if (namespace) base.kill()
      // The launcher is not inside until it has joined; it must not go on to start anything.
      else if (!leader.gone()) leader.signal('SIGKILL')
      if (members().length > 0) cgroup.kill()
    },
    survivors: () => pids(members()),
  }
}
