// What prepare()'s shared steps decided, handed to the tier's own builder (namespace.ts, process.ts), and
// what that builder hands back. Types and one helper only: both tiers import this, plan.ts imports them.
import type { Capabilities } from '../host/capabilities.js'
import type { CgroupWrite } from '../host/cgroup-files.js'
import type { CgroupController, CgroupSupport } from '../host/cgroups.js'
import type { UidLease } from '../host/uid-pool.js'
import type { Policy } from '../policy/schema.js'
import type { Rootfs } from '../rootfs/rootfs.js'
import type { ClockEnv } from './clock.js'
import { type IdentityPath, identityFiles } from './identity.js'
import type { LauncherSpec } from './launcher.js'
import type { PathFds, ResolvedPath } from './paths.js'

/**
 * The sandbox's cgroup, when the machine offers one: cordon creates it with its limits before launch,
 * and the launcher (started as cordon, before it drops to the sandbox uid) joins it itself, v1 and v2
 * alike, before anything else runs. In the namespace tier bwrap's monitor and init are inside too.
 */
export interface CgroupPlan {
  support: Exclude<CgroupSupport, { version: null }>
  /** Its directory in each hierarchy (see `cgroupDirs`). */
  dirs: Map<CgroupController, string>
  writes: CgroupWrite[]
}

/** The paths the policy names, resolved (no symlink left): judged on their fds later. */
export interface NamedPaths {
  cwd: string
  writable: string[]
  readable: string[] | undefined
  rootfs: Rootfs | null
  /** Each of them (a called function's modules too) with the symlinks on its way a sandbox could have planted. */
  resolved: ResolvedPath[]
}

export interface PlanContext {
  command: readonly string[]
  policy: Policy
  caps: Capabilities
  /** The sandbox's environment: the tier's builder adds what only it sets (proxies, TMPDIR, the clock). */
  env: Record<string, string>
  named: NamedPaths
  /** A called function's module paths, resolved and judged. */
  shown: string[]
  /** The network bridge's real path, judged (namespace tier with an allowlist), else null. */
  bridge: string | null
  /** The command as found on the sandbox's PATH (`program`) and the real path judged and run (`real`). */
  check: { program: string; real: string }
  /** The clock's variables, for the program alone; null without a clock. */
  clock: ClockEnv | null
  lease: UidLease | null
  cgroup: CgroupPlan | null
  seccomp: Buffer | null
  /** Nothing but its session marks the sandbox's processes (the launcher kills the session at the end). */
  sessionBound: boolean
  /** The sandbox gets an IPC namespace of its own. */
  ownIpc: boolean
  proxied: boolean
  pathFds: PathFds
  /** The directory holding this run's proxy sockets, with an allowlist. */
  netDir: string | undefined
  /** A warm member's launch (see warm.ts): the program is cordon-await, waiting for its run. */
  warm: boolean
}

/** The launcher's options that prepare() sets the same way for both tiers. */
type SharedLauncherOptions =
  | 'launcher'
  | 'keepFds'
  | 'rlimits'
  | 'join'
  | 'scratch'
  | 'drop'
  | 'mergeStderr'
  | 'program'

/** The tier's own part of the launch. */
export interface TierLaunch {
  /** What the launcher executes: bwrap with its argv, or (process tier) the program itself. */
  program: readonly string[]
  /** The process tier's private TMPDIR on the host, made by the launcher; null for none. */
  scratch: string | null
  launcher: Omit<LauncherSpec, SharedLauncherOptions>
}

/**
 * cordon's /etc/passwd and /etc/group for the sandbox's own user, with the HOME it now has: the run's uid,
 * or (not as root) this user's, which bwrap maps to itself.
 */
export function identityFor(
  lease: UidLease | null,
  env: Readonly<Record<string, string>>,
): Record<IdentityPath, string> {
  const who = lease ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }
  return identityFiles(who.uid, who.gid, env.HOME ?? '/')
}
