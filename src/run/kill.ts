// Finding and stopping every process of one sandbox. The namespace tier's hard stop is atomic: killing
// bwrap's monitor takes down its PID namespace. The process tier relies on the sandbox's own uid (or
// cgroup), so processes that left the session (setsid) are still found; without either, setsid is refused
// and the session is what marks them.
import type { Readable } from 'node:stream'
import { isLiving, livingByUid, livingDescendants, livingInSession, signal } from './procs.js'

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
 * The process cordon spawned: the launcher, which becomes bwrap's monitor or stays as the program's. Signalled through
 * its ChildProcess, which never signals a pid it has already reaped (and so might belong to someone else).
 */
export interface Leader {
  pid: number
  /** It has exited (the supervisor saw it; asking the kernel about a dead pid costs a thrown ESRCH, ~100 µs). */
  gone(): boolean
  signal(sig: NodeJS.Signals): void
}

/**
 * `list`, read until it comes back empty after the leader is gone: from then on nothing can bring a
 * sandbox process back, so the empty answer is not asked for again.
 */
function finalWhenEmpty(leader: Leader, list: () => number[]): () => number[] {
  let over = false
  return () => {
    if (over) return []
    const pids = list()
    over = pids.length === 0 && leader.gone()
    return pids
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
 * after its clone: if the monitor dies before that, the init lives on, re-parented, still in the
 * launcher's session (it never calls setsid) and holding the output pipes, so `kill` after the monitor
 * is gone goes after it.
 */
export function namespaceProcesses(leader: Leader): SandboxProcesses & { setInit(pid: number): void } {
  let init: number | undefined
  const findInit = () => {
    if (init === undefined && !leader.gone()) init = livingDescendants(leader.pid)[0]
    return init
  }
  const survivors = () => {
    if (init !== undefined) return isLiving(init) ? [init] : []
    return leader.gone() ? livingInSession(leader.pid) : []
  }
  return {
    setInit(pid) {
      init = pid
    },
    term() {
      const pidInit = findInit()
      const programs = pidInit === undefined ? [] : livingDescendants(pidInit)
      signal(programs, 'SIGTERM')
      return programs.length > 0
    },
    kill() {
      if (leader.gone()) return signal(survivors(), 'SIGKILL')
      findInit()
      leader.signal('SIGKILL')
    },
    survivors,
  }
}

export function processTierProcesses(leader: Leader, uid: number | null): SandboxProcesses {
  // With a uid of its own every sandbox process carries it; otherwise the session is all we have.
  // Once none is left and the launcher is gone (before it drops to the uid, it would not be counted),
  // nothing can bring one back, so an empty scan (a /proc walk: ~0.3 ms) is not repeated.
  const all = finalWhenEmpty(leader, () => (uid !== null ? livingByUid(uid) : livingInSession(leader.pid)))
  // The leader itself too: it is the launcher's monitor, root and outside the cgroup, which no scan finds.
  // SIGTERM it ignores (the program gets its own); SIGKILL takes the program with it (parent-death signal),
  // also while the program is still being set up, before any scan could find it.
  const send = (sig: NodeJS.Signals) => {
    const others = all().filter((pid) => pid !== leader.pid)
    if (!leader.gone()) leader.signal(sig)
    signal(others, sig)
    // Only a sandbox process counts as reached: until one is there, a graceful stop asks again.
    return others.length > 0
  }
  return {
    term: () => send('SIGTERM'),
    kill: () => {
      send('SIGKILL')
    },
    survivors: all,
  }
}

/** SIGKILL survivors until none are left or `timeoutMs` passes; returns the pids still alive. */
export async function reap(procs: SandboxProcesses, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const alive = procs.survivors()
    if (alive.length === 0 || Date.now() > deadline) return alive
    signal(alive, 'SIGKILL')
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
  cgroup: { pids(): number[]; kill(): void },
  base: SandboxProcesses,
  namespace: boolean,
  leader: Leader,
): SandboxProcesses {
  const members = finalWhenEmpty(leader, () => cgroup.pids())
  return {
    term: () => base.term(),
    kill() {
      if (namespace) base.kill()
      // The launcher is not inside until it has joined; it must not go on to start anything.
      else if (!leader.gone()) leader.signal('SIGKILL')
      if (members().length > 0) cgroup.kill()
    },
    survivors: members,
  }
}
