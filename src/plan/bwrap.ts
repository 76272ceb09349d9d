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
   * Hold the program until the supervisor has put bwrap's processes in the sandbox cgroup: bwrap writes
   * its child's pid to `info` and waits for a byte on `block` before running the program.
   */
  holdFds?: { info: number; block: number }
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
const byDepth = (paths: readonly string[]) => [...paths].sort((a, b) => a.length - b.length)

export function bwrapArgs(spec: BwrapSpec): string[] {
  const size = String(spec.tmpfsBytes)
  const tmpfs = (dir: string) => ['--size', size, '--tmpfs', dir]
  const args: string[] = []
  if (spec.readable) {
    // --ro-bind-try: a system path this distribution lacks (/lib32, /libx32) is simply absent.
    for (const p of SYSTEM_PATHS) args.push('--ro-bind-try', p, p)
  } else {
    args.push('--ro-bind', '/', '/')
  }
  args.push('--dev', '/dev', '--proc', '/proc', ...tmpfs('/tmp'))
  // Hidden first, so paths bound below (readable, cwd, writable) show through a hidden parent such as $HOME.
  for (const h of spec.hide) args.push(...(h.dir ? tmpfs(h.path) : ['--ro-bind', '/dev/null', h.path]))
  for (const p of byDepth(spec.readable ?? [])) args.push('--ro-bind', p, p)
  // The cwd is always visible: bound again when the private /tmp, a hidden path or strict mode covers it.
  const shown = spec.readable ? [...SYSTEM_PATHS, ...spec.readable] : ['/']
  const covered = [...spec.hide.map((h) => h.path), '/tmp']
  const cwdHidden =
    !shown.some((dir) => covers(dir, spec.cwd)) || covered.some((dir) => covers(dir, spec.cwd) && dir !== '/')
  if (cwdHidden && spec.cwd !== '/' && !spec.writable.some((dir) => covers(dir, spec.cwd)))
    args.push('--ro-bind', spec.cwd, spec.cwd)
  // Shorter paths first so a nested writable path is bound on top of its parent.
  for (const dir of byDepth(spec.writable)) args.push('--bind', dir, dir)
  for (const h of spec.hide) if (h.dir) args.push('--remount-ro', h.path)
  args.push('--unshare-all')
  if (spec.network === 'host') args.push('--share-net')
  args.push('--hostname', 'cordon', '--die-with-parent', '--new-session', '--chdir', spec.cwd)
  if (spec.holdFds) {
    args.push('--info-fd', String(spec.holdFds.info), '--block-fd', String(spec.holdFds.block))
  }
  if (spec.seccompFd !== undefined) args.push('--seccomp', String(spec.seccompFd))
  return args
}
