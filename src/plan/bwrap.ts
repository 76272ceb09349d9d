// bubblewrap arguments for the namespace tier: read-only host root, private /tmp and /dev, fresh /proc,
// every namespace unshared (network too unless asked), own session, dies with its parent.
export interface BwrapSpec {
  /** Real, existing host paths bound read-write at the same place. */
  writable: readonly string[]
  /** Real, existing working directory; bound read-only when no writable path covers it. */
  cwd: string
  network: 'none' | 'host'
  /**
   * Hold the program until the supervisor has put bwrap's processes in the sandbox cgroup: bwrap writes
   * its child's pid to `info` and waits for a byte on `block` before running the program.
   */
  holdFds?: { info: number; block: number }
  /** fd from which bwrap reads the seccomp program it installs just before running the program. */
  seccompFd?: number
}

const covers = (dir: string, target: string) =>
  target === dir || target.startsWith(dir.endsWith('/') ? dir : `${dir}/`)

export function bwrapArgs(spec: BwrapSpec): string[] {
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp']
  // The cwd stays visible even when it lives under the host's /tmp, which the private /tmp hides.
  if (!spec.writable.some((dir) => covers(dir, spec.cwd))) args.push('--ro-bind', spec.cwd, spec.cwd)
  // Shorter paths first so a nested writable path is bound on top of its parent.
  for (const dir of [...spec.writable].sort((a, b) => a.length - b.length)) args.push('--bind', dir, dir)
  args.push('--unshare-all')
  if (spec.network === 'host') args.push('--share-net')
  args.push('--hostname', 'cordon', '--die-with-parent', '--new-session', '--chdir', spec.cwd)
  if (spec.holdFds)
    args.push('--info-fd', String(spec.holdFds.info), '--block-fd', String(spec.holdFds.block))
  if (spec.seccompFd !== undefined) args.push('--seccomp', String(spec.seccompFd))
  return args
}
