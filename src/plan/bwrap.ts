// bubblewrap arguments for the namespace tier: read-only host root (or, in strict mode, only the system
// directories), private size-limited /tmp, private /dev and /proc, hidden paths, every namespace unshared
// (network too unless asked), own session, dies with its parent.
export interface BwrapSpec {
  /** Real, existing host paths bound read-write at the same place. */
  writable: readonly string[]
  /** Real, existing working directory; bound read-only when no writable path covers it. */
  cwd: string
  network: 'none' | 'host'
  /** Size of the private /tmp and of every other tmpfs, in bytes. */
  tmpfsBytes: number
  /** Real paths to hide: directories become an empty read-only tmpfs, files /dev/null. */
  hide: readonly { path: string; dir: boolean }[]
  /** Strict mode: when set, only the system directories plus these real paths are visible at all. */
  readable?: readonly string[]
  /**
   * bwrap writes its init's pid to `info` (how cordon finds the sandbox's processes); with `block` it
   * also waits for a byte there before running the program, until the supervisor has put that init
   * into the sandbox cgroup.
   */
  holdFds?: { info: number; block?: number }
  /** fd from which bwrap reads the seccomp program it installs just before running the program. */
  seccompFd?: number
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

const covers = (dir: string, target: string) =>
  target === dir || target.startsWith(dir.endsWith('/') ? dir : `${dir}/`)
const depth = (p: string) => (p === '/' ? 0 : p.split('/').length - 1)

/** One mount: applied parent-first, so a deeper mount always lands on top of the ones that contain it. */
interface Mount {
  path: string
  /** Among mounts of the same depth: shown paths, then writable (rw wins over ro), then hides. */
  rank: number
  args: string[]
}

export function bwrapArgs(spec: BwrapSpec): string[] {
  const size = String(spec.tmpfsBytes)
  const tmpfs = (dir: string) => ['--size', size, '--tmpfs', dir]
  const mounts: Mount[] = []
  const add = (path: string, rank: number, args: string[]) => mounts.push({ path, rank, args })

  if (spec.readable) {
    // --ro-bind-try: a system path this distribution lacks (/lib32, /libx32) is simply absent.
    for (const p of SYSTEM_PATHS) add(p, 0, ['--ro-bind-try', p, p])
    for (const p of spec.readable) add(p, 0, ['--ro-bind', p, p])
  } else {
    add('/', 0, ['--ro-bind', '/', '/'])
  }
  add('/dev', 1, ['--dev', '/dev'])
  add('/proc', 1, ['--proc', '/proc'])
  add('/tmp', 1, tmpfs('/tmp'))
  // The cwd is always visible: bound again when the private /tmp, a hidden path or strict mode covers it.
  const shown = spec.readable ? [...SYSTEM_PATHS, ...spec.readable] : ['/']
  const covering = [...spec.hide.map((h) => h.path), '/tmp']
  const cwdHidden =
    !shown.some((dir) => covers(dir, spec.cwd)) || covering.some((dir) => covers(dir, spec.cwd))
  const cwdWritable = spec.writable.some((dir) => covers(dir, spec.cwd))
  if (cwdHidden && spec.cwd !== '/' && !cwdWritable) add(spec.cwd, 2, ['--ro-bind', spec.cwd, spec.cwd])
  for (const dir of spec.writable) add(dir, 3, ['--bind', dir, dir])
  // A path given as readable, writable or cwd is shown, not hidden; a hidden path *inside* one still is.
  const explicit = new Set([...(spec.readable ?? []), ...spec.writable, spec.cwd])
  const hide = spec.hide.filter((h) => !explicit.has(h.path))
  // A hidden file reads as an empty /dev/null (a plain bind would be nodev and unreadable).
  for (const h of hide) add(h.path, 4, h.dir ? tmpfs(h.path) : ['--dev-bind', '/dev/null', h.path])

  mounts.sort((a, b) => depth(a.path) - depth(b.path) || a.rank - b.rank)
  const args = mounts.flatMap((m) => m.args)
  // Last, so every mount inside a hidden directory exists before its tmpfs turns read-only.
  for (const h of hide) if (h.dir) args.push('--remount-ro', h.path)
  args.push('--unshare-all')
  if (spec.network === 'host') args.push('--share-net')
  args.push('--hostname', 'cordon', '--die-with-parent', '--new-session', '--chdir', spec.cwd)
  if (spec.holdFds) args.push('--info-fd', String(spec.holdFds.info))
  if (spec.holdFds?.block !== undefined) args.push('--block-fd', String(spec.holdFds.block))
  if (spec.seccompFd !== undefined) args.push('--seccomp', String(spec.seccompFd))
  return args
}
