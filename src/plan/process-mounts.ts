// The process tier's own mounts as root: its child unshares a mount namespace (the launcher's
// --mount-ns) and covers a few host directories with its own. Pure: plan.ts decides when, this spells what.
import { covers as beneathOrAt } from './bwrap.js'
import { IDENTITY_PATHS, type IdentityPath } from './identity.js'
import { blockedDirs } from './paths.js'

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
  /**
   * Whether the sandbox uid may search a host directory (its own mode bits). One it cannot search above
   * a shown or writable path is covered (see blockedDirs), the paths beneath it shown again. Unset: all.
   */
  searchable?: (dir: string) => boolean
}

export interface ProcessMounts {
  /** Mounted in this order, parents first: `empty` a read-only tmpfs of root's, else the sandbox's own. */
  covers: { path: string; empty: boolean }[]
  /**
   * Host paths under a cover, bound again where they are (from the fds they were judged on): outermost
   * only (a bind brings what is below).
   */
  keeps: string[]
  /** The covers that are there because the sandbox uid cannot search them (see `searchable`). */
  blocked: string[]
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
  const base = [
    ...(spec.network === 'none' ? [{ path: '/run', empty: true }] : []),
    { path: ROOT_TMPDIR, empty: false },
    { path: spec.shm, empty: false },
  ]
  // A directory the sandbox uid cannot search (root's 0700 home above a clone) over a path the policy
  // names: an empty tmpfs of root's, the named paths shown again in it, nothing else of it.
  const named = [...spec.shown, ...spec.writable]
  const blocked = spec.searchable
    ? blockedDirs(
        named,
        ['/', ...named],
        base.map((c) => c.path),
        spec.searchable,
      )
    : []
  const depth = (p: string) => p.split('/').length
  // Parents first: a cover mounted later lands on top of the ones that contain it.
  const coverList = [...base, ...blocked.map((p) => ({ path: p, empty: true }))].sort(
    (a, b) => depth(a.path) - depth(b.path),
  )
  const isCover = (p: string) => coverList.some((c) => c.path === p)
  const under = (p: string) => coverList.some((c) => c.path !== p && beneathOrAt(c.path, p))
  const candidates = [
    ...new Set([...spec.shown.filter(under), ...spec.writable.filter((p) => under(p) || isCover(p))]),
  ]
  const keeps = candidates.filter((p) => !candidates.some((q) => q !== p && beneathOrAt(q, p))).sort()
  const identity = IDENTITY_PATHS.filter((p) => !spec.writable.includes(p))
  return { covers: coverList, keeps, blocked, writable: [ROOT_TMPDIR, spec.shm], proc: true, identity }
}
