// Host paths a policy names (cwd, writable, readable, a called function's module) are bound or allowed
// exactly as they were judged. A path is resolved component by component (following only symlinks that root
// or cordon's own uid own: a sandbox may have planted any other), which gives a path with no symlink left in
// it; that path is opened O_PATH|O_NOFOLLOW and the open must be that very path (/proc/self/fd shows where
// it landed: a component swapped for a symlink after the walk makes them differ); the rest is judged on the
// fd, and the fd itself goes to bwrap (--bind-fd) or to the launcher's Landlock rules. Nothing is looked up
// by name again between the judging and the use.
import {
  closeSync,
  constants,
  type Dirent,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  type Stats,
  statSync,
} from 'node:fs'
import path from 'node:path'
import { PolicyError } from '../errors.js'
import { walkPath } from '../host/walk.js'
import { FIRST_PATH_FD } from './fd-layout.js'

/** open(2)'s O_PATH on x86_64 and the generic Linux ABI (arm64, riscv); fs.constants lacks it. */
export const O_PATH = 0o10000000

/**
 * `given` (absolute) with every symlink resolved, component by component; a symlink owned by neither root
 * nor cordon's own uid is refused, naming the field: a sandbox may have planted it in a writable directory
 * to turn a later run's `writable` (or `cwd`) into a path of its choosing.
 */
export function resolvePath(field: string, given: string): string {
  return resolveNamedPath(field, given).path
}

/** A named path resolved, and where the symlinks on its way that a sandbox could have planted lie. */
export interface ResolvedPath {
  field: string
  path: string
  /**
   * Not as root a sandbox has cordon's own uid: every symlink of that uid followed on the way (each where it
   * lies, as a real path) may be one a sandbox left. As root, none: a sandbox's uid is never cordon's.
   */
  planted: string[]
}

/** resolvePath, saying which of the symlinks followed a sandbox could have planted (see ResolvedPath). */
export function resolveNamedPath(field: string, given: string): ResolvedPath {
  const own = process.getuid?.() ?? 0
  const planted: string[] = []
  const walk = walkPath('/', given, (at, st) => {
    if (st.uid !== 0 && st.uid !== own) {
      throw new PolicyError(
        field,
        `${given} goes through ${at}, a symlink owned by uid ${st.uid} (a sandbox may have planted it); give the real path`,
      )
    }
    if (own !== 0 && st.uid === own) planted.push(at)
  })
  if (walk.ok) return { field, path: walk.path, planted }
  if (walk.why === 'loop') throw new PolicyError(field, `${given} goes through a symlink loop`)
  if (walk.why === 'unreachable')
    throw new PolicyError(field, `${given} cannot be reached at ${walk.at} (${walk.code})`)
  throw new PolicyError(field, `${given} does not exist`)
}

/**
 * Refuses a named path that a symlink a sandbox could have planted (see ResolvedPath) carries into what the
 * sandbox would not see otherwise: beneath a hidden path, and not beneath another path the policy shows
 * (`shown`: the cwd, writable and readable paths) deeper than that. A named path shows through `hide`, so
 * such a link, left by an earlier run in its writable directory, would turn a later run's cwd or writable
 * path into the secrets hidden from both. Naming the real path still shows it.
 */
export function refusePlantedIntoHidden(
  named: readonly ResolvedPath[],
  hide: readonly Hidden[],
  shown: readonly string[],
): void {
  const deepest = (list: readonly string[]) => list.reduce((a, b) => (depthOf(b) > depthOf(a) ? b : a))
  for (const n of named) {
    const link = n.planted[0]
    if (link === undefined) continue
    const hiders = hide.map((h) => h.path).filter((h) => atOrBeneath(h, n.path))
    if (hiders.length === 0) continue
    const into = deepest(hiders)
    const showers = shown.filter((s) => s !== n.path && atOrBeneath(s, n.path))
    // What sees it otherwise is the deepest of those above it: a tie is shown (bwrapArgs drops that hide).
    if (showers.length > 0 && depthOf(deepest(showers)) >= depthOf(into)) continue
    throw new PolicyError(
      n.field,
      `${n.path} is reached through ${link}, a symlink of cordon's own uid (a sandbox may have planted it), ` +
        `and lies beneath ${into}, which is hidden; give the real path`,
    )
  }
}

/** A judged path, opened: the fd is the object judged, whatever its name points at later. */
export interface OpenedPath {
  path: string
  field: string
  fd: number
  stat: Stats
}

/** One fd the sandbox gets: the host's `host` (judged at `path`) at the sandbox's (the launcher's) `child`. */
export interface PassedFd {
  child: number
  host: number
  path: string
}

/**
 * The judged paths of one run, open on the host until the sandbox has started. Each use of a path in the
 * sandbox gets an fd of its own (bwrap closes an fd once it has bound it), numbered from FIRST_PATH_FD;
 * paths never passed are closed as soon as the plan is made. `close()` gives every fd back, once.
 */
export class PathFds {
  private readonly opened = new Map<string, OpenedPath>()
  private readonly uses: PassedFd[] = []
  private open_ = true

  /**
   * Open `real` (from resolvePath) and check that the open is that very path; `dir`: it must be a
   * directory. Throws a PolicyError naming `field` when it is not, or changed since it was resolved.
   */
  open(field: string, real: string, { dir = false } = {}): OpenedPath {
    const known = this.opened.get(real)
    if (known) {
      if (dir && !known.stat.isDirectory()) throw new PolicyError(field, `${real} is not a directory`)
      return known
    }
    let fd: number
    try {
      // No O_DIRECTORY: a writable or readable path may be a file, and the type is judged on the fd below.
      fd = openSync(real, O_PATH | constants.O_NOFOLLOW)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP')
        throw new PolicyError(field, `${real} changed while it was checked`)
      throw new PolicyError(field, `${real} cannot be opened (${code})`)
    }
    try {
      // A component swapped for a symlink after the walk was followed by open: it landed elsewhere.
      // O_NOFOLLOW leaves a last component that became a symlink as the link itself: fstat says so.
      const stat = fstatSync(fd)
      if (readlinkSync(`/proc/self/fd/${fd}`) !== real || stat.isSymbolicLink())
        throw new PolicyError(field, `${real} changed while it was checked`)
      if (dir && !stat.isDirectory()) throw new PolicyError(field, `${real} is not a directory`)
      const opened = { path: real, field, fd, stat }
      this.opened.set(real, opened)
      return opened
    } catch (error) {
      closeSync(fd)
      throw error
    }
  }

  /** The sandbox's fd for one more use of `real`, which must be open here. */
  pass(real: string): number {
    const opened = this.opened.get(real)
    if (!opened) throw new Error(`cordon: ${real} was not judged before it was passed`)
    const child = FIRST_PATH_FD + this.uses.length
    this.uses.push({ child, host: opened.fd, path: real })
    return child
  }

  /** Every fd the sandbox gets, in order. */
  get passed(): readonly PassedFd[] {
    return this.uses
  }

  /** Close the paths no use was made of: only what the sandbox gets stays open until it starts. */
  closeUnpassed(): void {
    const used = new Set(this.uses.map((u) => u.host))
    for (const [real, opened] of this.opened) {
      if (used.has(opened.fd)) continue
      closeSync(opened.fd)
      this.opened.delete(real)
    }
  }

  /** Give every fd back (the sandbox has started, or never will); only the first call closes anything. */
  close(): void {
    if (!this.open_) return
    this.open_ = false
    for (const opened of this.opened.values()) closeSync(opened.fd)
    this.opened.clear()
  }
}

/** Permission bits (r=4, w=2, x=1) that apply to uid/gid on a file of `st` (no supplementary groups). */
function bitsFor(st: Stats, uid: number, gid: number): number {
  return st.uid === uid ? (st.mode >> 6) & 7 : st.gid === gid ? (st.mode >> 3) & 7 : st.mode & 7
}

/** Whether uid/gid may search `dir` (a real path) and every directory above it. */
export function searchableBy(dir: string, uid: number, gid: number): boolean {
  for (let at = dir; ; at = path.dirname(at)) {
    const st = statSync(at, { throwIfNoEntry: false })
    if (!st || (bitsFor(st, uid, gid) & 1) === 0) return false
    if (at === '/') return true
  }
}

/** Whether uid/gid may search the directory `dir` itself (not those above it): its x bit for them. */
export function canSearch(dir: string, uid: number, gid: number): boolean {
  const st = statSync(dir, { throwIfNoEntry: false })
  return st !== undefined && (bitsFor(st, uid, gid) & 1) !== 0
}

/** Whether uid/gid may search (enter) the opened directory itself, judged on its fd. */
export function enterableBy(opened: OpenedPath, uid: number, gid: number): boolean {
  return (bitsFor(opened.stat, uid, gid) & 1) !== 0
}

/** Whether uid/gid may read the opened path by its own mode bits (the directories above aside). */
export function readableItselfBy(opened: OpenedPath, uid: number, gid: number): boolean {
  return (bitsFor(opened.stat, uid, gid) & 4) !== 0
}

const depthOf = (p: string) => (p === '/' ? 0 : p.split('/').length - 1)
const atOrBeneath = (dir: string, p: string) => p === dir || p.startsWith(dir === '/' ? '/' : `${dir}/`)

/**
 * The directories a sandbox must have covered (an empty tmpfs, the paths it is given bound into it) to
 * reach every one of `targets` (real paths the policy names): walking down each target, the first
 * directory the sandbox uid cannot search (`searchable` says no) where the sandbox would see the host's
 * own. What it sees at a directory is decided by the deepest of `shown` (the host's view: a bind of that
 * very path; the root, unless covered) and `covers` (the sandbox's own: a tmpfs, or something that is not
 * the host's at that path) at or above it; a tie is the host's (a path the policy names, kept on a cover).
 * A target itself is never covered: that it cannot be searched is its own mode, which the sandbox lives
 * with as the host would. Covers found on the way count for the targets after them.
 */
export function blockedDirs(
  targets: readonly string[],
  shown: readonly string[],
  covers: readonly string[],
  searchable: (dir: string) => boolean,
): string[] {
  const out: string[] = []
  const deepest = (list: readonly string[], dir: string) =>
    Math.max(-1, ...list.filter((d) => atOrBeneath(d, dir)).map(depthOf))
  const byDepth = [...new Set(targets)].sort((a, b) => depthOf(a) - depthOf(b))
  for (const target of byDepth) {
    const parts = target.split('/').filter(Boolean)
    for (let n = 0; n < parts.length; n++) {
      const dir = `/${parts.slice(0, n).join('/')}`
      if (targets.includes(dir) || out.includes(dir)) continue
      const own = deepest([...covers, ...out], dir) > deepest(shown, dir)
      if (!own && !searchable(dir)) out.push(dir)
    }
  }
  return out
}

/**
 * Whether every directory above `dir` is a real directory of root's that nobody else may write (as the
 * launcher requires of a place it mounts on: no one but root can rename or swap a name on the way).
 */
export function rootOnlyAbove(dir: string): boolean {
  for (let at = path.dirname(dir); ; at = path.dirname(at)) {
    const st = lstatSync(at, { throwIfNoEntry: false })
    if (!st?.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) return false
    if (at === '/') return true
  }
}

/** Whether uid/gid may write the opened path by its mode bits. */
export function writableBy(opened: OpenedPath, uid: number, gid: number): boolean {
  return (bitsFor(opened.stat, uid, gid) & 2) !== 0
}

export interface Hidden {
  path: string
  dir: boolean
}

/** Paths to hide that exist (hiding nothing is already safe), as real paths; never the root itself. */
export function hiddenPaths(paths: readonly string[]): Hidden[] {
  const out: Hidden[] = []
  for (const p of paths) {
    try {
      const real = realpathSync(p)
      if (real !== '/') out.push({ path: real, dir: statSync(real).isDirectory() })
    } catch {
      // Does not exist: nothing to hide.
    }
  }
  return out
}

/**
 * A hidden directory that is shown all the same (it is the cwd, or `readable`/`writable` names it: cordon
 * started from the home it hides by default) still keeps its secrets: every top-level dot-entry in it
 * (.ssh, .gnupg, .aws, .config, .netrc, histories…) is hidden in turn. One that a listed path or the cwd
 * names itself is shown (bwrapArgs drops a hide equal to those); one that holds a listed path is hidden
 * with that path shown inside it, as in any hidden directory. A symlink (a dotfile manager's `.ssh ->
 * dotfiles/ssh`) hides what it leads to inside that directory, which is shown too, and is no less secret;
 * one leading outside it (`.config -> /etc/xdg`) or to it is left alone: what it points at there is shown
 * or hidden under its own name. A directory the sandbox uid cannot search (`reachable` says no: root's
 * 0700 home, for a sandbox of another uid) keeps everything in it out of reach already, and bwrap, which
 * runs as that uid, could not mount inside it either.
 *
 * Such a link in a directory the sandbox can write (`writableField` names the field that makes it so) is
 * refused, unless what it leads to is hidden by a name of its own (listed in `hide`, or inside a hidden
 * directory), which stays a mount point in place (see pinnedDirs). A mount pins a directory or a file, never
 * a symlink: a run could remove or repoint the link, and the next run with the same policy would see no link
 * or one leading out and hide nothing, showing dotfiles/ssh. cordon keeps nothing between runs, and what is
 * there then cannot tell that swap apart (most homes simply have no .aws); nor does pinning the link's
 * directory help, which stops a rename but not an unlink. So the setup that allows the swap never starts.
 */
export function secretsOf(
  hide: readonly Hidden[],
  shown: readonly string[],
  reachable: (dir: string) => boolean = () => true,
  writableField: (dir: string) => string | null = () => null,
): Hidden[] {
  const out: Hidden[] = []
  for (const h of hide) {
    if (!h.dir || !shown.includes(h.path) || !reachable(h.path)) continue
    let entries: Dirent[]
    try {
      entries = readdirSync(h.path, { withFileTypes: true })
    } catch {
      continue // unreadable to cordon: nothing of it to list
    }
    const linked: { link: string; target: Hidden }[] = []
    const entered = out.length
    for (const e of entries) {
      if (!e.name.startsWith('.')) continue
      if (!e.isSymbolicLink()) {
        out.push({ path: path.join(h.path, e.name), dir: e.isDirectory() })
        continue
      }
      const link = path.join(h.path, e.name)
      const [target] = hiddenPaths([link])
      if (target && target.path !== h.path && atOrBeneath(h.path, target.path)) linked.push({ link, target })
    }
    // Hidden by a name of its own (listed, or a dot-entry that is no link): there whatever a link says.
    const byName = [...hide, ...out.slice(entered)].map((x) => x.path).filter((x) => !shown.includes(x))
    const field = linked.length > 0 ? writableField(h.path) : null
    for (const { link, target } of linked) {
      out.push(target)
      if (field === null || byName.some((x) => atOrBeneath(x, target.path))) continue
      throw new PolicyError(
        field,
        `${h.path} is writable in the sandbox and its ${path.basename(link)} is a symlink to ${target.path}, ` +
          'which a run could remove or repoint so that a later run no longer hides what it leads to; ' +
          `add ${target.path} to hide (beside ${h.path}), or do not make ${h.path} writable`,
      )
    }
  }
  return out
}

/**
 * The `writable` field (`writable.N`) through which the sandbox can change the entries of `dir`, or null:
 * the deepest path bound at or above it decides (a writable one wins a tie, as in bwrapArgs), and a
 * read-only one (`readable`, a hide, the cwd bound again over a hide) below every writable one shows it
 * read-only.
 */
export function writableVia(
  dir: string,
  writable: readonly string[],
  readOnly: readonly string[],
): string | null {
  let field: string | null = null
  let depth = -1
  writable.forEach((w, i) => {
    if (atOrBeneath(w, dir) && depthOf(w) > depth) {
      field = `writable.${i}`
      depth = depthOf(w)
    }
  })
  return readOnly.some((r) => atOrBeneath(r, dir) && depthOf(r) > depth) ? null : field
}
