export interface LauncherSpec {
  launcher: string
  /**
   * The fds beyond stdio that cordon pipes to this run (the refusal pipe, fd 4, among them); the launcher
   * closes every other inherited one.
   */
  keepFds: readonly number[]
  /** rlimits in prlimit's syntax (`--cpu=S:H`), which the launcher shares. */
  rlimits: readonly string[]
  /** cgroup files the launcher writes 0 into, joining the sandbox's cgroup before anything else runs. */
  join: readonly string[]
  /** The private TMPDIR the launcher makes (for the sandbox uid); null for none. */
  scratch: string | null
  /**
   * Not as root (the process tier): `scratch` and /dev/shm become tmpfs of this many bytes in a user and
   * mount namespace of the sandbox's own (see own_tmpfs in launch.c); null leaves `scratch` a directory.
   */
  ownTmpfs?: number | null
  /** An empty network namespace (root only). */
  unshareNet: boolean
  /** An IPC namespace of its own (root only): SysV IPC objects die with the sandbox. */
  unshareIpc: boolean
  /**
   * A mount namespace of its own (root only, the process tier; see processMounts): `covers` (tmpfs of
   * `tmpfsBytes`), `keeps` bound again beneath them (copies of the mounts at the fds they were judged on,
   * which must be in `keepFds`), and a /proc of its own.
   */
  mounts: {
    covers: readonly { path: string; empty: boolean }[]
    keeps: readonly { fd: number; path: string }[]
    proc: boolean
    tmpfsBytes: number
    /** Files holding these contents, read-only, over these host files (cordon's /etc/passwd, /etc/group). */
    files?: readonly { path: string; content: string }[]
  } | null
  /**
   * Judged paths' fds (in `keepFds`) that bwrap, as the sandbox uid, could not reach by the path their fd
   * names: the launcher (root, with `drop`) attaches copies of their mounts where it can (see stage_fds in
   * launch.c) and gives bwrap those in their place.
   */
  stageFds?: readonly number[]
  /** The sandbox's own uid/gid, when cordon runs as root. */
  drop: { uid: number; gid: number } | null
  /** Landlock: writes only beneath these paths (and `writableFds`); null leaves the filesystem to its permissions. */
  writable: readonly string[] | null
  /**
   * Landlock, with `writable`: writes also beneath these fds, judged paths cordon opened (see paths.ts);
   * the launcher closes each once its rule is made. They must be in `keepFds`.
   */
  writableFds?: readonly number[]
  /** Landlock scopes (ABI 6): no signals to processes outside the sandbox, no abstract unix sockets of theirs. */
  scope: { signals: boolean; abstractUnix: boolean }
  /** The seccomp program (struct sock_filter[]), passed in hex; null for none. */
  seccomp: Buffer | null
  /**
   * fds the launcher makes memfds holding these contents, for bwrap's --ro-bind-data (cordon's /etc/passwd
   * and /etc/group). None of them may be in `keepFds`.
   */
  memfds?: readonly { fd: number; content: string }[]
  /** `program` is bwrap: it gets the environment as arguments for the sandbox, and none of its own. */
  bwrapEnv: boolean
  /**
   * Stay as the program's parent (process tier): pass on how it ended, real-time signals included, and
   * kill the whole sandbox if the host dies first.
   */
  monitor: boolean
  /**
   * With `monitor`, when nothing but the session marks the sandbox's processes: the monitor kills the rest
   * of its session when the program ends (and when the host dies), while its id is still the sandbox's.
   */
  killSession: boolean
  /** stderr becomes the stdout pipe (2>&1), before anything else: one stream in the order it was written. */
  mergeStderr?: boolean
  /** The judged working directory's fd (process tier): entered by fd, never by name. */
  cwdFd?: number
  /** argv[0] for the program, when it is not `program[0]` (the path executed is the judged real path). */
  argv0?: string
  program: readonly string[]
}

export function launcherArgv(spec: LauncherSpec): string[] {
  return [
    spec.launcher,
    `--keep-fds=${[...spec.keepFds].sort((a, b) => a - b).join(',')}`,
    ...(spec.cwdFd !== undefined ? [`--cwd-fd=${spec.cwdFd}`] : []),
    ...spec.rlimits,
    ...spec.join.map((file) => `--join=${file}`),
    ...(spec.unshareNet ? ['--unshare-net'] : []),
    ...(spec.unshareIpc ? ['--unshare-ipc'] : []),
    ...(spec.mounts
      ? [
          '--mount-ns',
          ...spec.mounts.keeps.map((k) => `--keep-fd=${k.fd}:${k.path}`),
          ...spec.mounts.covers.map((c) => `--${c.empty ? 'empty' : 'tmpfs'}=${c.path}`),
          `--tmpfs-size=${spec.mounts.tmpfsBytes}`,
          ...(spec.mounts.proc ? ['--proc'] : []),
          ...(spec.mounts.files ?? []).map((f) => `--ro-bind-data=${f.path}:${f.content}`),
        ]
      : []),
    ...(spec.scratch ? [`--mkdir=${spec.scratch}`] : []),
    ...(spec.scratch && spec.ownTmpfs ? [`--own-tmpfs=${spec.ownTmpfs}`] : []),
    ...(spec.stageFds ?? []).map((fd) => `--stage-fd=${fd}`),
    ...(spec.drop ? [`--uid=${spec.drop.uid}`, `--gid=${spec.drop.gid}`] : []),
    ...(spec.writable
      ? [
          '--landlock-fs',
          ...spec.writable.map((p) => `--landlock-write=${p}`),
          ...(spec.writableFds ?? []).map((fd) => `--landlock-write-fd=${fd}`),
        ]
      : []),
    ...(spec.scope.signals ? ['--scope-signals'] : []),
    ...(spec.scope.abstractUnix ? ['--scope-abstract-unix'] : []),
    ...(spec.seccomp ? [`--seccomp=${spec.seccomp.toString('hex')}`] : []),
    ...(spec.memfds ?? []).map((m) => `--memfd=${m.fd}:${m.content}`),
    ...(spec.bwrapEnv ? ['--bwrap-env'] : []),
    ...(spec.monitor ? ['--monitor'] : []),
    ...(spec.monitor && spec.killSession ? ['--kill-session'] : []),
    ...(spec.mergeStderr ? ['--merge-stderr'] : []),
    ...(spec.argv0 !== undefined ? [`--argv0=${spec.argv0}`] : []),
    '--',
    ...spec.program,
  ]
}

/**
 * The sandbox's exec step: the launcher at `step` (no set-up at all in this mode) executes `file` with
 * argv[0] `argv0` and the arguments that follow. For bwrap, which cannot set argv[0] itself (before 0.9).
 */
export function execStep(step: string, argv0: string, file: string): string[] {
  return [step, '--exec', argv0, file]
}

/** Landlock's ABI with scopes for signals and abstract unix sockets (Linux 6.12). */
export const LANDLOCK_SCOPES = 6
