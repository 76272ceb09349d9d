// A warm member's plan: the namespace tier's launch built up to the last step before the program, which
// is cordon-await (native/await.c) in its place, and what a run hands such a member (its activation record).
// prepare() builds both with `warm` (see plan.ts); the run side is src/run/warm.ts.
//
// What a member has made before its run (its shape) is exactly its launcher's argv, the seccomp program
// bwrap installed and the uid pool it took its uid from: a run is given a member only when its own plan,
// built as a member's with that member's uid and cgroup, is the same in all of them (the key). Everything
// else is the run's own and reaches the member only in the record: the program and its argv, the
// environment, the rlimits, the umask and stdin; the cgroup's limits, which the host writes before the
// record. Nothing is "close enough": a key that differs in one byte is a cold run.
import type { UidLease } from '../host/uid-pool.js'
import type { Isolation } from '../policy/result.js'
import type { Policy } from '../policy/schema.js'

/** An existing member's uid and cgroup, which the run's plan is built with to be compared with it. */
export interface WarmSeed {
  lease: UidLease
  /** The member's cgroup's name (its directories: `cgroupDirs(support, name)`). */
  cgroupName: string | null
}

/** prepare()'s `warm`: a new member's plan (no seed, no command), or a run's plan for `seed`'s member. */
export interface WarmRequest {
  seed: WarmSeed | null
}

/** What the run gives the member: the program, at its judged real path, with its argv and environment. */
export interface Activation {
  file: string
  /** argv[0] is the name the program was found by when its real path differs, as the exec step gives. */
  argv: string[]
  env: Record<string, string>
  /** The launcher's rlimit arguments (`--cpu=S:H`…), which cordon-await applies, lowering its own. */
  rlimits: string[]
}

/** The member's side of a plan built with `warm`. */
export interface WarmPlan {
  /** The shape: equal keys, equal members (see the header). */
  key: string
  cgroupName: string | null
  /** The run's record; null for a member's own plan, which has no program. */
  activation: Activation | null
}

/** Why a policy cannot have a warm member (its run is cold), or null when it can. */
export function coldReason(tier: Isolation, calling: boolean, proxied: boolean): string | null {
  if (tier !== 'namespace') return 'only the namespace tier has warm members'
  if (calling) return "a called function's run is never warm"
  if (proxied) return 'a network allowlist starts proxies of its own for each run'
  return null
}

/** The key of a plan built with `warm` (see the header): its launcher argv, filter and uid pool. */
export function warmKey(
  file: string,
  args: readonly string[],
  seccomp: Buffer | null,
  uidPool: Policy['uidPool'],
): string {
  return JSON.stringify([file, args, seccomp?.toString('hex') ?? null, uidPool])
}

/**
 * The activation record's bytes for native/await.c: NUL-terminated fields, `umask` in octal, `stdin`
 * 'null' (the program reads /dev/null, as a cold run without stdin) or 'pipe'.
 */
export function activationRecord(a: Activation, umask: number, stdin: 'null' | 'pipe'): Buffer {
  const env = Object.entries(a.env).map(([k, v]) => `${k}=${v}`)
  const fields = [
    'cordon-activation-1',
    umask.toString(8),
    stdin,
    String(a.rlimits.length),
    ...a.rlimits,
    a.file,
    String(a.argv.length),
    ...a.argv,
    String(env.length),
    ...env,
  ]
  return Buffer.from(`${fields.join('\0')}\0`)
}

/** bwrap's options and how many values each takes: only those cordon's bwrapArgs writes (see mountPaths). */
const BWRAP_ARITY: Readonly<Record<string, number>> = {
  '--unshare-all': 0,
  '--share-net': 0,
  '--die-with-parent': 0,
  '--new-session': 0,
  '--tmpfs': 1,
  '--dev': 1,
  '--proc': 1,
  '--remount-ro': 1,
  '--chdir': 1,
  '--hostname': 1,
  '--json-status-fd': 1,
  '--seccomp': 1,
  '--size': 1,
  '--bind': 2,
  '--ro-bind': 2,
  '--dev-bind': 2,
  '--ro-bind-try': 2,
  '--bind-fd': 2,
  '--ro-bind-fd': 2,
  '--symlink': 2,
  '--ro-bind-data': 2,
}
/** The options whose values are host paths looked up by name: every one but fd numbers, sizes and names. */
const NAMED: Readonly<Record<string, readonly number[]>> = {
  '--tmpfs': [0],
  '--dev': [0],
  '--proc': [0],
  '--remount-ro': [0],
  '--chdir': [0],
  '--bind': [0, 1],
  '--ro-bind': [0, 1],
  '--dev-bind': [0, 1],
  '--ro-bind-try': [0, 1],
  '--bind-fd': [1],
  '--ro-bind-fd': [1],
  '--symlink': [1],
  '--ro-bind-data': [1],
}

/**
 * Every path the launch's bwrap looks up by name (mount points and sources, the working directory), but
 * the root itself. A member made its mounts on what those names were then: a run is given it only while
 * each still names the same file (src/run/warm.ts), or a host path swapped since (a daemon's socket made
 * again, a hidden directory renamed and another put in its place) would not be covered as a cold run
 * covers it now. An option bwrapArgs does not write throws: the list must be whole.
 */
export function namedPaths(launcherArgs: readonly string[]): string[] {
  const start = launcherArgs.indexOf('--') + 2
  const out = new Set<string>()
  for (let i = start; i < launcherArgs.length && launcherArgs[i] !== '--'; ) {
    const option = launcherArgs[i]!
    const arity = BWRAP_ARITY[option]
    if (arity === undefined) throw new Error(`cordon: bwrap option ${option} has no entry in namedPaths`)
    for (const at of NAMED[option] ?? []) {
      const value = launcherArgs[i + 1 + at]!
      if (value !== '/') out.add(value)
    }
    i += 1 + arity
  }
  return [...out]
}
