// bubblewrap arguments for the namespace tier: read-only host root (or, in strict mode, only the system
// directories), private size-limited /tmp (and /run without the network), private /dev and /proc, hidden
// paths, every namespace unshared (network too unless asked), own session, dies with its parent.
import path from 'node:path'
import { BRIDGE_MOUNT_POINT } from '../net/proxy.js'
import { IDENTITY_PATHS, type IdentityPath } from './identity.js'
import { blockedDirs } from './paths.js'

/** Where a run's proxy sockets appear inside the sandbox (network allowlist). */
export const NET_DIR_INSIDE = '/tmp/.cordon-net'
/** Where cordon's network bridge appears inside the sandbox, on any root filesystem. */
export const BRIDGE_INSIDE = `${NET_DIR_INSIDE}/${BRIDGE_MOUNT_POINT}`
/**
 * Where cordon's launcher is bound (read-only, by fd) when it is the sandbox's exec step (see plan.ts):
 * in bwrap's own /dev, so that no host directory needs a mount point and no host directory's permissions
 * stand between the sandbox uid and it.
 */
export const EXEC_INSIDE = '/dev/.cordon-exec'
/** Where the host's cgroup hierarchies are mounted; the sandbox sees only its own cgroup there. */
export const CGROUP_ROOT = '/sys/fs/cgroup'

/** The sandbox's own cgroup: each of its directories at its hierarchy's mount point, and the links to those. */
export interface CgroupView {
  binds: readonly { source: string; dest: string }[]
  /** e.g. /sys/fs/cgroup/cpuacct -> cpu,cpuacct */
  links: readonly { at: string; target: string }[]
}

export interface BwrapSpec {
  /** Real, existing host paths bound read-write at the same place. */
  writable: readonly string[]
  /** Real, existing working directory; bound read-only when no writable path covers it. */
  cwd: string
  /** Host directory of this run's proxy sockets, shown at NET_DIR_INSIDE (network allowlist). */
  netDir?: string
  /** Host path of cordon's network bridge, bound read-only at BRIDGE_INSIDE (with netDir). */
  bridge?: string
  /** Another root filesystem: / is assembled from its top-level entries, read-only; host paths are bound in. */
  rootfs?: { dir: string; entries: readonly { name: string; symlink: string | null }[] }
  /** Real paths that must be visible (read-only at least) besides the cwd. */
  visible?: readonly string[]
  network: 'none' | 'host'
  /** Size of the private /tmp and of every other tmpfs, in bytes. */
  tmpfsBytes: number
  /** Real paths to hide: directories become an empty read-only tmpfs, files /dev/null. */
  hide: readonly { path: string; dir: boolean }[]
  /** Strict mode: when set, only the system directories plus these real paths are visible at all. */
  readable?: readonly string[]
  /**
   * fd on which bwrap reports, as JSON, its init's host pid (so cordon can tell its processes apart) and,
   * only once it ran the program, the program's exit (so a program cannot pass for bwrap refusing).
   */
  statusFd?: number
  /** fd from which bwrap reads the seccomp program it installs just before running the program. */
  seccompFd?: number
  /**
   * Binds writable, readable, cwd and visible paths (and the exec step and the bridge) by fd: called once per bind with
   * the path, it returns the sandbox's fd for that use (bwrap closes each fd it binds). Without it, by path.
   */
  fdFor?: (path: string) => number
  /** Host path of cordon's launcher, bound read-only at EXEC_INSIDE for the sandbox's exec step. */
  execStep?: string
  /**
   * Real paths of the host's bound unix sockets (listening ones, and datagram ones): without the host's
   * network, each one the sandbox would see gets /dev/null bound over it, so connecting fails.
   */
  sockets?: readonly string[]
  /**
   * Asked only of the sockets about to be covered: whether each is still a socket (the list may be a
   * moment old; bwrap could not mount over a path that is gone). Without it, all are taken as live.
   */
  socketLive?: (path: string) => boolean
  /**
   * The sandbox's own cgroup, shown at CGROUP_ROOT in place of the host's (every run's cgroups); an empty
   * view (no binds) shows an empty directory. Unset: the host's, as the root shows it.
   */
  cgroups?: CgroupView
  /**
   * cordon's own /etc/passwd and /etc/group (identity.ts), read-only, in place of the host's: called once
   * for each the sandbox really gets, it returns the fd bwrap copies it from (--ro-bind-data). Not on
   * another root (the tree's own users are not the host's), nor where the policy lists that very path
   * (`readable`, `writable`: listed wins) or hides it or a directory above it. Unset: the host's.
   */
  identityFd?: (path: IdentityPath) => number
  /**
   * Whether the sandbox uid may search a host directory (its own mode bits only). A directory it cannot
   * search above a path the policy names, where the host's view would show, is covered with an empty tmpfs
   * (see blockedDirs): bwrap (as that uid) could not mount beneath it, nor the program reach the path.
   * Unset: every directory is searchable (cordon's uid is the sandbox's).
   */
  searchable?: (dir: string) => boolean
  /**
   * The launcher's staging directory (its --stage-fd copies of judged paths beneath such directories):
   * covered in the sandbox wherever the host's view would show it.
   */
  stageDir?: string
}

/** What programs need to run in strict mode: the userland, and the few /etc files the loader and libc read. */
export const SYSTEM_PATHS = [
  '/usr',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/etc/alternatives',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/passwd',
  '/etc/group',
  '/etc/nsswitch.conf',
  '/etc/hosts',
  '/etc/resolv.conf',
  '/etc/localtime',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/os-release',
] as const

/** `target` is `dir` or beneath it. */
export const covers = (dir: string, target: string) =>
  target === dir || target.startsWith(dir.endsWith('/') ? dir : `${dir}/`)
const depth = (p: string) => (p === '/' ? 0 : p.split('/').length - 1)

/**
 * The directories between a writable path and a hidden path beneath it (not the writable path, not the
 * hidden one): each is bound onto itself so it is a mount point in the sandbox, which nothing there can
 * rename or remove (EBUSY). A hide is by name: a run that renamed one of them (data -> data2, a link or
 * nothing left at data) moved the hidden path out from under its name, and the next run hid nothing.
 * Not one a listed path binds already, nor one inside a hidden path (the bind would show it).
 */
export function pinnedDirs(
  hide: readonly { path: string }[],
  writable: readonly string[],
  listed: readonly string[],
): string[] {
  const out = new Set<string>()
  for (const h of hide) {
    for (let dir = path.dirname(h.path); dir !== '/' && dir !== h.path; dir = path.dirname(dir)) {
      if (!writable.some((w) => w !== dir && covers(w, dir))) break
      if (listed.includes(dir) || hide.some((other) => covers(other.path, dir))) continue
      out.add(dir)
    }
  }
  return [...out].sort()
}

/** The sandbox's own mounts in place of the host's: a hide of one of them is already done. */
const privateDirs = (network: BwrapSpec['network']) =>
  network === 'none' ? ['/dev', '/proc', '/tmp', '/run'] : ['/dev', '/proc', '/tmp']

/**
 * The hides bwrap makes: not one equal to a listed path or the cwd (listed wins; one *inside* them still
 * applies), nor a private mount, which hides the host's view already.
 */
export function appliedHides<H extends { path: string }>(
  hide: readonly H[],
  spec: Pick<BwrapSpec, 'writable' | 'readable' | 'cwd' | 'network'>,
): H[] {
  const explicit = [...(spec.readable ?? []), ...spec.writable]
  const own = privateDirs(spec.network)
  return hide.filter((h) => !explicit.includes(h.path) && h.path !== spec.cwd && !own.includes(h.path))
}

/** One mount: applied parent-first, so a deeper mount always lands on top of the ones that contain it. */
interface Mount {
  path: string
  /** Among mounts of the same depth: shown paths, private mounts, the cwd, writable (rw wins over ro), hides. */
  rank: number
  /** Whether what is below becomes invisible (a private or hiding tmpfs) rather than the host's view. */
  hides: boolean
  args: string[]
  /** A bind of a path the policy names: by fd when the spec says so (args[0] is --bind or --ro-bind). */
  byFd?: boolean
}

const byMountOrder = (a: Mount, b: Mount) => depth(a.path) - depth(b.path) || a.rank - b.rank

export function bwrapArgs(spec: BwrapSpec): string[] {
  const size = String(spec.tmpfsBytes)
  const tmpfs = (dir: string) => ['--size', size, '--tmpfs', dir]
  const mounts: Mount[] = []
  const add = (path: string, rank: number, hides: boolean, args: string[], byFd = false) =>
    mounts.push({ path, rank, hides, args, byFd })
  /** The mount that decides what `path` shows so far: the last one at or above it, in mount order. */
  const topAt = (path: string) =>
    mounts
      .filter((m) => covers(m.path, path))
      .sort(byMountOrder)
      .at(-1)

  // Explicitly listed paths are shown whole: nothing of the system list or the hide list lands inside them
  // again (a re-mounted /etc/localtime would even fail: it is an absolute symlink).
  const explicit = [...(spec.readable ?? []), ...spec.writable]
  const insideExplicit = (p: string) => explicit.some((dir) => dir !== p && covers(dir, p))
  if (spec.rootfs) {
    // A tmpfs root (made read-only last) so mount points for host paths can be created in it; every
    // entry hides the host's view of that path, so the cwd and the like are bound in on top.
    add('/', 0, true, ['--tmpfs', '/'])
    for (const e of spec.rootfs.entries) {
      const at = `/${e.name}`
      add(
        at,
        0,
        true,
        e.symlink === null
          ? ['--ro-bind', path.join(spec.rootfs.dir, e.name), at]
          : ['--symlink', e.symlink, at],
        // A directory of the tree as judged (see judgePaths), whatever its name points at meanwhile.
        e.symlink === null,
      )
    }
    for (const p of spec.readable ?? []) add(p, 0, false, ['--ro-bind', p, p], true)
  } else if (spec.readable) {
    // --ro-bind-try: a system path this distribution lacks (/lib32, /libx32) is simply absent. The host's
    // users only when cordon gives none of its own.
    const own = (p: string) => spec.identityFd !== undefined && IDENTITY_PATHS.some((i) => i === p)
    for (const p of SYSTEM_PATHS) if (!insideExplicit(p) && !own(p)) add(p, 0, false, ['--ro-bind-try', p, p])
    for (const p of spec.readable) add(p, 0, false, ['--ro-bind', p, p], true)
  } else {
    add('/', 0, false, ['--ro-bind', '/', '/'])
  }
  // bwrap's /dev is an unsized tmpfs the sandbox uid owns: its shm gets a sized tmpfs of its own, and
  // /dev itself turns read-only at the end (device nodes still work), or it would hold any amount of RAM.
  const privateMounts: [string, string[]][] = [
    ['/dev', ['--dev', '/dev', ...tmpfs('/dev/shm')]],
    ['/proc', ['--proc', '/proc']],
    ['/tmp', tmpfs('/tmp')],
  ]
  // Without the network, no host daemon either: /run holds their sockets (D-Bus, journald, snapd, cups),
  // which a read-only bind does not stop anyone from connecting to.
  if (spec.network === 'none') privateMounts.push(['/run', tmpfs('/run')])
  for (const [dir, args] of privateMounts) add(dir, 1, true, args)
  const isPrivate = (p: string) => privateMounts.some(([dir]) => dir === p)
  // The sandbox's own /proc and /dev are whole views of its own: nothing of the host's goes in them.
  const ownView = (p: string) => isPrivate(p) || covers('/proc', p) || covers('/dev', p)
  for (const dir of spec.writable) add(dir, 3, false, ['--bind', dir, dir], true)
  if (spec.netDir) add(NET_DIR_INSIDE, 3, false, ['--ro-bind', spec.netDir, NET_DIR_INSIDE])
  // Over the empty file the proxy made in netDir: a mount point already there, in a read-only directory.
  if (spec.netDir && spec.bridge)
    add(BRIDGE_INSIDE, 3, false, ['--ro-bind', spec.bridge, BRIDGE_INSIDE], true)
  if (spec.execStep) add(EXEC_INSIDE, 3, false, ['--ro-bind', spec.execStep, EXEC_INSIDE], true)
  const hide = appliedHides(spec.hide, spec)
  // cordon's users in place of the host's, over whatever would show the host's (the root, /etc listed).
  if (spec.identityFd && !spec.rootfs) {
    for (const p of IDENTITY_PATHS) {
      if (explicit.includes(p) || hide.some((h) => covers(h.path, p))) continue
      add(p, 4, true, ['--ro-bind-data', String(spec.identityFd(p)), p])
    }
  }
  // Pinned: what lies between a writable path and a hidden one stays where the hide names it.
  for (const dir of pinnedDirs(hide, spec.writable, explicit)) add(dir, 3, false, ['--bind', dir, dir], true)
  // A hidden file reads as an empty /dev/null (a plain bind would be nodev and unreadable).
  for (const h of hide) add(h.path, 4, true, h.dir ? tmpfs(h.path) : ['--dev-bind', '/dev/null', h.path])
  // A directory the sandbox uid cannot search (root's 0700 home above a clone cordon runs from) between
  // it and a path the policy names is covered like a hidden one: the named paths are bound into the
  // tmpfs, and nothing else of the directory shows.
  const blocked: string[] = []
  if (spec.searchable) {
    const identity = (m: Mount) => !m.hides && m.args.length === 3 && m.args[1] === m.args[2]
    // The cwd and visible paths are bound again where they would not show (never at / or in the sandbox's own).
    const shownPaths = [...(spec.visible ?? []), spec.cwd].filter((p) => p !== '/' && !ownView(p))
    blocked.push(
      ...blockedDirs(
        [...explicit, spec.cwd, ...(spec.visible ?? [])],
        [...mounts.filter(identity).map((m) => m.path), ...explicit, ...shownPaths],
        // Strict mode's root is bwrap's own tmpfs.
        [...mounts.filter((m) => !identity(m)).map((m) => m.path), ...(topAt('/') ? [] : ['/'])],
        spec.searchable,
      ),
    )
  }
  if (spec.stageDir) {
    const top = topAt(spec.stageDir)
    if (top && !top.hides) blocked.push(spec.stageDir)
  }
  for (const dir of blocked) add(dir, 4, true, tmpfs(dir))
  // The host's cgroups (every run's names, usage and limits) give way to the sandbox's own, read-only, at
  // each hierarchy's mount point, where programs read their limits (Node, the JVM and Go size heaps by
  // them). Only where the host's would show: strict mode and another root show no /sys/fs/cgroup anyway.
  const cgroupTop = spec.cgroups && topAt(CGROUP_ROOT)
  const cgroupTmpfs = spec.cgroups !== undefined && cgroupTop !== undefined && !cgroupTop.hides
  if (spec.cgroups && cgroupTmpfs) {
    const whole = spec.cgroups.binds.find((b) => b.dest === CGROUP_ROOT)
    if (whole) add(CGROUP_ROOT, 1, true, ['--ro-bind', whole.source, CGROUP_ROOT])
    else {
      add(CGROUP_ROOT, 1, true, tmpfs(CGROUP_ROOT))
      for (const b of spec.cgroups.binds) add(b.dest, 1, false, ['--ro-bind', b.source, b.dest])
      for (const l of spec.cgroups.links) add(l.at, 1, true, ['--symlink', l.target, l.at])
    }
  }
  // The cwd (and any other path that must stay visible, like a called function's module) is bound again
  // when the mount that would show it hides it instead (inside the private /tmp, a hide) or, in strict
  // mode, when nothing shows it. Never over the sandbox's own /tmp, /run, /proc or /dev: a cwd there
  // (cordon started from /tmp) sees the sandbox's own, not the host's files or processes.
  for (const path of [spec.cwd, ...(spec.visible ?? [])]) {
    const top = topAt(path)
    if (path === '/' || ownView(path) || (top && !top.hides)) continue
    add(path, 2, false, ['--ro-bind', path, path], true)
    // Shown whole too: drop system paths inside it (cwd /etc in strict mode).
    const inside = mounts.filter(
      (m) => m.args[0] === '--ro-bind-try' && m.path !== path && covers(path, m.path),
    )
    for (const m of inside) mounts.splice(mounts.indexOf(m), 1)
  }
  // Without the host's network its daemons are out of reach: a pathname socket of theirs the sandbox would
  // see (through the root, the cwd, a module's directory) is covered by /dev/null, which no one can connect
  // to. Not one the sandbox cannot see anyway (its own /tmp, /run, /dev; a hidden path), nor one inside a
  // path the policy names (`writable`, `readable`): those are shown whole, sockets and all.
  if (spec.network === 'none') {
    for (const s of spec.sockets ?? []) {
      const top = topAt(s)
      if (!top || top.hides || explicit.some((dir) => covers(dir, s))) continue
      if (spec.socketLive && !spec.socketLive(s)) continue
      add(s, 5, true, ['--ro-bind', '/dev/null', s])
    }
  }

  mounts.sort(byMountOrder)
  // Each bind of a path the policy names gets its fd only now, for the mounts that are really made.
  const args = mounts.flatMap((m) => {
    if (!m.byFd || !spec.fdFor) return m.args
    const [flag, source, dest] = m.args as [string, string, string]
    return [flag === '--bind' ? '--bind-fd' : '--ro-bind-fd', String(spec.fdFor(source)), dest]
  })
  // Last, so every mount inside a hidden directory exists before its tmpfs turns read-only.
  for (const h of hide) if (h.dir) args.push('--remount-ro', h.path)
  for (const dir of blocked) args.push('--remount-ro', dir)
  if (cgroupTmpfs && !spec.cgroups?.binds.some((b) => b.dest === CGROUP_ROOT))
    args.push('--remount-ro', CGROUP_ROOT)
  if (spec.rootfs) args.push('--remount-ro', '/')
  args.push('--remount-ro', '/dev', '--unshare-all')
  if (spec.network === 'host') args.push('--share-net')
  args.push('--hostname', 'cordon', '--die-with-parent', '--new-session', '--chdir', spec.cwd)
  if (spec.statusFd !== undefined) args.push('--json-status-fd', String(spec.statusFd))
  if (spec.seccompFd !== undefined) args.push('--seccomp', String(spec.seccompFd))
  return args
}
