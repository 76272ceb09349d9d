// The process tier's argv: util-linux tools in one exec chain, no bubblewrap. As root, unshare makes an
// empty network namespace first; setpriv then drops to the sandbox uid (no supplementary groups), sets
// no_new_privs and a parent-death signal; prlimit applies the rlimits and execs the program.
export interface ProcessTierSpec {
  tools: { unshare: string; setpriv: string; prlimit: string }
  /** The sandbox's own uid/gid, when cordon runs as root. */
  drop: { uid: number; gid: number } | null
  /** An empty network namespace (root only). */
  isolateNetwork: boolean
  rlimits: readonly string[]
  program: readonly string[]
}

export function processTierArgv(spec: ProcessTierSpec): string[] {
  const { tools, drop } = spec
  return [
    ...(spec.isolateNetwork ? [tools.unshare, '--net', '--'] : []),
    tools.setpriv,
    ...(drop ? [`--reuid=${drop.uid}`, `--regid=${drop.gid}`, '--clear-groups'] : []),
    '--no-new-privs',
    '--pdeathsig',
    'KILL',
    '--',
    tools.prlimit,
    ...spec.rlimits,
    '--',
    ...spec.program,
  ]
}
