// The process tier's own mounts as root: its child unshares a mount namespace (the launcher's
// --mount-ns) and covers a few host directories with its own. Pure: plan.ts decides when, this spells what.
import { covers as beneathOrAt } from './bwrap.js'
import { IDENTITY_PATHS, type IdentityPath } from './identity.js'

/** The sandbox's TMPDIR (and HOME) as root: a tmpfs of tmpfsBytes over this root-only directory. */
export const ROOT_TMPDIR = '/run/cordon'

export interface ProcessMountsSpec {
  network: 'none' | 'host'
  /** Real paths the policy names that must stay visible as they are on the host: cwd, visible. */
  shown: readonly string[]
  /** The policy's writable real paths: the host's, even one that is a cover itself (`/dev/shm`). */
  writable: readonly string[]
  /** The host's /dev/shm, resolved (a distribution may make it a symlink). */
  shm: string
}

export interface ProcessMounts {
  /** Mounted in this order, parents first: `empty` a read-only tmpfs of root's, else the sandbox's own. */
  covers: { path: string; empty: boolean }[]
  /** Host paths under a cover, bound again where they are: outermost only (a bind brings what is below). */
  keeps: string[]
  /** Where the sandbox writes besides the policy's paths (Landlock). */
  writable: string[]
  /** A procfs of its own that shows the sandbox uid its own processes only. */
  proc: true
  /** Host files covered by cordon's own, read-only (see identity.ts). */
  identity: IdentityPath[]
}

/**
 * - TMPDIR (ROOT_TMPDIR) and /dev/shm: tmpfs of the sandbox's own, so both are RAM bounded by tmpfsBytes
 *   (charged to its memory cgroup, ENOSPC when full) and go with the run. /dev/shm is host-wide otherwise:
 *   POSIX shared memory outlived the run there, visible to the next.
 * - Without the network an empty /run, as in the namespace tier: the sockets of host daemons there
 *   (D-Bus's system bus, journald) are world-connectable, and this tier lets the sandbox open unix sockets.
 * - Paths the policy names beneath a cover (a cwd or writable directory under /run) are shown again; a
 *   cover itself as the cwd (cordon started from /run) shows the sandbox's own, never the host's, but a
 *   cover asked for as writable (`/dev/shm`) is the host's, as the policy says.
 * - /etc/passwd and /etc/group: cordon's own (identity.ts), not the host's list of users; a file the policy
 *   names as writable is the host's, as it says.
 */
export function processMounts(spec: ProcessMountsSpec): ProcessMounts {
  const coverList = [
    ...(spec.network === 'none' ? [{ path: '/run', empty: true }] : []),
    { path: ROOT_TMPDIR, empty: false },
    { path: spec.shm, empty: false },
  ]
  const isCover = (p: string) => coverList.some((c) => c.path === p)
  const under = (p: string) => coverList.some((c) => c.path !== p && beneathOrAt(c.path, p))
  const candidates = [
    ...new Set([...spec.shown.filter(under), ...spec.writable.filter((p) => under(p) || isCover(p))]),
  ]
  const keeps = candidates.filter((p) => !candidates.some((q) => q !== p && beneathOrAt(q, p))).sort()
  const identity = IDENTITY_PATHS.filter((p) => !spec.writable.includes(p))
  return { covers: coverList, keeps, writable: [ROOT_TMPDIR, spec.shm], proc: true, identity }
}
