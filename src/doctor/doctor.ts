// What `cordon doctor` prints: each check with what it means for enforcement and how to fix it.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { type Capabilities, probeCapabilities } from '../host/capabilities.js'
import { detectCgroups } from '../host/cgroups.js'
import { LAUNCHER_PATH, SPAWNER_PATH } from '../host/native.js'
import { isExecutableFile, resolveProgram, SAFE_PATH } from '../host/programs.js'
import { uidPoolSchema } from '../host/uid-pool.js'
import { clockEnv } from '../plan/clock.js'
import { LANDLOCK_SCOPES } from '../plan/launcher.js'
import { blockedDirs, canSearch, rootOnlyAbove } from '../plan/paths.js'
import { tierFor } from '../plan/plan.js'
import { DEFAULT_DENIED } from '../plan/seccomp.js'
import type { Isolation } from '../policy/result.js'
import { listRootfs, rootfsCacheDir } from '../rootfs/rootfs.js'

export interface Check {
  name: string
  ok: boolean
  detail: string
  /** How to make it ok; null when it is. */
  fix: string | null
}

export interface Diagnosis {
  capabilities: Capabilities
  /**
   * The tier `isolation: 'auto'` runs on this machine, as run() chooses it; null when that tier cannot run
   * here (it is never swapped for the other: see `usable`).
   */
  autoTier: Isolation | null
  /** The tiers that run here when asked for by name. */
  usable: Isolation[]
  checks: Check[]
}

/**
 * What `isolation: 'auto'` runs here: the tier run() picks (plan's tierFor: the namespace tier whenever
 * bubblewrap is installed and user namespaces are allowed), if it works. A bubblewrap that is there but
 * fails is no fallback to the process tier, in run() or here.
 */
export function autoChoice(
  caps: Capabilities,
  namespaceWorks: boolean,
  ownTmpfsWorks = true,
): { autoTier: Isolation | null; picks: Isolation; usable: Isolation[] } {
  const picks = tierFor('auto', caps)
  // Both tiers start through the launcher: without it nothing runs. The process tier not as root needs a
  // user namespace for its bounded TMPDIR (else every run is refused, limits.tmpfsBytes, or fails).
  const processWorks = caps.launcher !== null && (caps.isRoot || (caps.userns && ownTmpfsWorks))
  const usable: Isolation[] = [
    ...(caps.launcher && namespaceWorks ? (['namespace'] as const) : []),
    ...(processWorks ? (['process'] as const) : []),
  ]
  return { autoTier: usable.includes(picks) ? picks : null, picks, usable }
}

function bwrapProbe(caps: Capabilities): { ok: boolean; detail: string } {
  if (!caps.bwrap) return { ok: false, detail: 'not installed' }
  const pool = uidPoolSchema.parse({})
  const asUser = caps.isRoot ? { uid: pool.first + pool.count - 1, gid: pool.first } : {}
  const probe = spawnSync(
    caps.bwrap,
    ['--ro-bind', '/', '/', '--unshare-all', '--die-with-parent', '--', 'true'],
    // The environment sandboxes get (bwrap looks `true` up on its PATH), not cordon's own.
    { encoding: 'utf8', timeout: 10_000, env: { PATH: SAFE_PATH }, ...asUser },
  )
  const version = spawnSync(caps.bwrap, ['--version'], { encoding: 'utf8' }).stdout.trim()
  if (probe.status === 0)
    return {
      ok: true,
      detail: `${version}; a sandbox launched as ${caps.isRoot ? 'a pool uid' : 'this user'}`,
    }
  return { ok: false, detail: `${version} failed: ${(probe.stderr || probe.error?.message || '').trim()}` }
}

/**
 * The clock, tried rather than assumed: a dynamically linked `date` under the variables a sandbox gets
 * must show the fake instant, one second later still near it (the clock runs on from there).
 */
function clockCheck(caps: Capabilities): Check {
  const name = 'clock'
  if (!caps.faketime) {
    return {
      name,
      ok: false,
      detail: 'libfaketime is not installed: the `clock` option is refused',
      fix: 'apt-get install -y faketime',
    }
  }
  const instant = Date.parse('2001-01-01T00:00:00Z')
  const probe = spawnSync('date', ['+%s'], {
    encoding: 'utf8',
    timeout: 10_000,
    env: { PATH: SAFE_PATH, ...clockEnv(new Date(instant).toISOString(), caps.faketime, {}) },
  })
  const seen = Number(probe.stdout.trim()) * 1000
  if (probe.status === 0 && Math.abs(seen - instant) < 60_000) {
    return {
      name,
      ok: true,
      detail: `libfaketime at ${caps.faketime}: \`clock\` gives dynamically linked programs (C, Python, Node) one sandbox-wide wall clock that starts at the instant and runs on; statically linked ones (Go) keep the real time`,
      fix: null,
    }
  }
  return {
    name,
    ok: false,
    detail: `libfaketime at ${caps.faketime} did not set the clock (date printed ${JSON.stringify(probe.stdout.trim())}): \`clock\` would not hold`,
    fix: 'reinstall it: apt-get install --reinstall -y libfaketime',
  }
}

/**
 * Not as root, the process tier's bounded TMPDIR tried rather than assumed: the launcher makes a tmpfs in a
 * user namespace of its own, which a container's seccomp profile or a security module can refuse though
 * the sysctls allow it. Null when there is nothing to try (root, no launcher, no user namespaces).
 */
export function ownTmpfsProbe(caps: Capabilities): { ok: boolean; detail: string } | null {
  const program = resolveProgram('true', SAFE_PATH, '/')
  if (caps.isRoot || !caps.launcher || !caps.userns || !program) return null
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cordon-doctor-'))
  try {
    const probe = spawnSync(
      caps.launcher,
      ['--keep-fds=', `--mkdir=${path.join(dir, 'tmp')}`, '--own-tmpfs=1048576', '--', program],
      { encoding: 'utf8', timeout: 10_000 },
    )
    if (probe.status === 0) return { ok: true, detail: 'a tmpfs in a user namespace of its own was made' }
    return { ok: false, detail: (probe.stderr || probe.error?.message || `exit ${probe.status}`).trim() }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export function processTierCheck(
  caps: Capabilities,
  ownTmpfs: { ok: boolean; detail: string } | null = null,
): Check {
  if (!caps.launcher) {
    return {
      name: 'process tier',
      ok: false,
      detail: `unavailable: cordon's launcher (${LAUNCHER_PATH}), which both tiers start through, is not built`,
      fix: 'apt-get install -y gcc libc6-dev, then npm run build (native/build.sh)',
    }
  }
  const network = !caps.seccompArch
    ? caps.isRoot
      ? 'own network namespace'
      : 'the network is NOT isolated'
    : caps.landlock >= LANDLOCK_SCOPES
      ? 'no sockets but unix ones (seccomp), none of the host abstract unix sockets (Landlock)'
      : caps.isRoot
        ? 'no sockets but unix ones (seccomp), own network namespace'
        : "no sockets but unix ones (seccomp); the host's abstract unix sockets stay reachable"
  // As root its own mount namespace bounds TMPDIR; otherwise a user namespace of its own does, where the
  // machine allows one, and without one every run is refused rather than given an unbounded TMPDIR.
  if (!caps.isRoot && !caps.userns) {
    return {
      name: 'process tier',
      ok: false,
      detail:
        'not as root it refuses every run (error, limits.tmpfsBytes): its TMPDIR and /dev/shm are bounded by a tmpfs in a user ' +
        `namespace of its own, and this machine allows none (${caps.usernsReason}); a host directory was bounded per file only`,
      fix: 'allow unprivileged user namespaces (see user namespaces above), or run cordon as root',
    }
  }
  if (ownTmpfs && !ownTmpfs.ok) {
    return {
      name: 'process tier',
      ok: false,
      detail: `not as root its runs fail: its TMPDIR is a tmpfs in a user namespace of its own, and making one failed: ${ownTmpfs.detail}`,
      fix: 'let this user make user namespaces and mount in them (a container: a seccomp profile that allows unshare), or run cordon as root',
    }
  }
  const mounts = caps.isRoot
    ? "own mount namespace: TMPDIR and /dev/shm are tmpfs of tmpfsBytes, /proc shows its own processes only, /run is empty without the network, /etc/passwd and /etc/group are cordon's (user sandbox)"
    : "own user and mount namespace (this user's uid mapped to itself; other users' files show as nobody): TMPDIR and /dev/shm are tmpfs of tmpfsBytes; /proc shows every process; the host's /etc/passwd and /etc/group (its users) stay visible and whoami names this user"
  return {
    name: 'process tier',
    ok: true,
    detail:
      `launcher ${caps.launcher}: rlimits, ${caps.isRoot ? 'own uid' : "this user's uid"}, new session, dies with cordon, ` +
      `${network}, ${caps.landlock >= 1 ? 'writes only to writable paths (Landlock)' : 'writes wherever its uid may'}, ${mounts}`,
    fix: null,
  }
}

/** Which architecture's filter every sandbox gets here, or that there is none (and denySyscalls is refused). */
export function seccompCheck(caps: Capabilities): Check {
  const arch = caps.seccompArch
  return {
    name: 'seccomp',
    ok: arch !== null,
    detail: arch
      ? `${arch} filter on every sandbox, both tiers (${DEFAULT_DENIED.length} calls refused, namespace flags, TIOCSTI/TIOCLINUX, personality; ${arch === 'x86_64' ? 'i386 and x32' : 'AArch32'} calls killed); sockets of the unix, inet, inet6 and netlink families only (no vsock, alg, packet…), and unix only in the process tier with network "none"`
      : `no filter: cordon builds one for x86_64 and aarch64 only, this is ${process.arch}; denySyscalls is refused`,
    fix: arch ? null : 'run on x86_64 or aarch64 (arm64)',
  }
}

/** What holds a sandbox's socket buffers: the cgroup version in use and the kernel's command line. */
export function socketMemoryCheck(version: 1 | 2 | null, cmdline: string): Check {
  const unaccepted =
    'connections not yet accepted are charged to no cgroup (kernel), bounded only by net.ipv4.tcp_mem'
  if (version === null) {
    return {
      name: 'socket memory',
      ok: false,
      detail:
        'not limited: without a cgroup, TCP and UDP buffers are bounded only by the host-wide net.ipv4.tcp_mem/udp_mem, unix ones by open files × net.core.wmem_max',
      fix: 'give cordon a usable cgroup (see cgroups)',
    }
  }
  if (/(^|\s)cgroup\.memory=\S*nosocket/.test(cmdline)) {
    return {
      name: 'socket memory',
      ok: false,
      detail: 'the kernel was booted with cgroup.memory=nosocket: socket buffers are charged to no cgroup',
      fix: 'remove cgroup.memory=nosocket from the kernel command line',
    }
  }
  return {
    name: 'socket memory',
    ok: true,
    detail:
      version === 1
        ? 'v1: TCP and UDP buffers capped at memoryBytes by memory.kmem.tcp.limit_in_bytes, beside the memory limit ' +
          `(past it the kernel still forces about one segment per connection); unix socket buffers charged to the memory limit; ${unaccepted}`
        : `v2: TCP, UDP and unix socket buffers charged to memory.max; ${unaccepted}`,
    fix: null,
  }
}

/** Memory one open file costs a sandbox's memory cgroup, with the mapping that keeps it open (measured). */
const FILE_COST_BYTES = 480

/**
 * RLIMIT_NOFILE bounds the files a sandbox holds through fds; a file still mapped after its fd is closed
 * is bounded only by the memory limit (each costs ~0.5 KiB of it). The host's file table is safe when
 * filling it would take more memory than the machine has.
 */
export function openFilesCheck(fileMax: number, memTotalBytes: number): Check {
  const fills = fileMax * FILE_COST_BYTES
  const ok = fills >= memTotalBytes
  return {
    name: 'open files',
    ok,
    detail:
      `each process at most maxOpenFiles (RLIMIT_NOFILE, default 1024); the host's file table holds ${fileMax}, ` +
      (ok
        ? 'more than the machine has memory for (every open file is charged to its sandbox memory cgroup)'
        : `and files kept open by mappings after their fds are closed are bounded only by the memory limits: sandboxes with ${Math.round(fills / 2 ** 20)} MiB of memory between them can fill it (ENFILE for every unprivileged process)`),
    fix: ok
      ? null
      : 'sysctl -w fs.file-max=9223372036854775807 (what systemd sets at boot): each open file is charged to its memory cgroup, so the memory limits bound the table',
  }
}

/** What pathsCheck asks of the filesystem, about the sandbox uid (see paths.ts). */
export interface PathProbe {
  /** Whether the sandbox uid may search this directory itself. */
  searchable(dir: string): boolean
  /** Whether only root can write every directory above this one (the process tier can cover it then). */
  rootOnlyAbove(dir: string): boolean
}

/**
 * Whether sandboxes can reach the paths a run needs from here: the working directory (which they must be
 * able to enter) and those cordon shows them (node itself for callFunction, cordon's own files). One
 * beneath a directory the sandbox uid cannot search (a clone under root's 0700 home) is covered there and
 * shown alone: always in the namespace tier, in the process tier only where nobody but root can write
 * above that directory (otherwise refused, naming the field).
 */
export function pathsCheck(
  isRoot: boolean,
  autoTier: 'namespace' | 'process' | null,
  cwd: string,
  shown: readonly { what: string; path: string }[],
  probe: PathProbe,
): Check {
  const name = 'paths'
  if (!isRoot) {
    return { name, ok: true, detail: 'sandboxes run as this user: they reach what it reaches', fix: null }
  }
  if (!probe.searchable(cwd)) {
    return {
      name,
      ok: false,
      detail: `the working directory ${cwd} cannot be entered by sandbox uids: runs started here are refused (cwd)`,
      fix: `chmod o+x ${cwd}, or start cordon (or give cwd) elsewhere`,
    }
  }
  // Grouped by the directory in the way: `the working directory /root/p and node /root/.nvm/bin are beneath /root`.
  const byBlocked = new Map<string, string[]>()
  for (const { what, path } of [{ what: 'the working directory', path: cwd }, ...shown]) {
    const [blocked] = blockedDirs([path], ['/'], [], probe.searchable)
    if (blocked) byBlocked.set(blocked, [...(byBlocked.get(blocked) ?? []), `${what} ${path}`])
  }
  const notes: string[] = []
  const fixes: string[] = []
  for (const [blocked, whats] of byBlocked) {
    const beneath = `${whats.join(' and ')} ${whats.length > 1 ? 'are' : 'is'} beneath ${blocked}, which sandbox uids cannot search`
    if (autoTier === 'process' && !probe.rootOnlyAbove(blocked)) {
      notes.push(`${beneath} and others can write above: the process tier refuses it`)
      fixes.push(`chmod o+x ${blocked}`)
    } else {
      const processToo = probe.rootOnlyAbove(blocked)
        ? ''
        : ' (the process tier refuses it: others can write above it)'
      notes.push(
        `${beneath}: each run covers it and shows the paths it is given in it, nothing else${processToo}`,
      )
    }
  }
  if (fixes.length > 0)
    return {
      name,
      ok: false,
      detail: notes.join('; '),
      fix: `${fixes.join('; ')}, or use the namespace tier`,
    }
  return {
    name,
    ok: true,
    detail:
      notes.length > 0
        ? notes.join('; ')
        : 'the working directory, node and cordon are reachable by sandbox uids',
    fix: null,
  }
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

const readNumber = (file: string, pattern: RegExp) => Number(pattern.exec(readText(file))?.[1] ?? 0)

/** node (which callFunction runs in the sandbox) and cordon's own files, as real paths. */
function cordonPaths(): { what: string; path: string }[] {
  const real = (p: string) => {
    try {
      return realpathSync(p)
    } catch {
      return null
    }
  }
  const out: { what: string; path: string }[] = []
  const node = real(path.dirname(process.execPath))
  if (node) out.push({ what: 'node', path: node })
  const own = real(path.dirname(LAUNCHER_PATH))
  if (own) out.push({ what: "cordon's files", path: own })
  return out
}

/** The pool's first uid (and its gid) as the sandbox uid every run of the pool shares the permissions of. */
function sandboxProbe(pool: { first: number }): PathProbe {
  return {
    searchable: (dir) => canSearch(dir, pool.first, pool.first),
    rootOnlyAbove,
  }
}

export function doctor(): Diagnosis {
  const caps = probeCapabilities()
  const bwrap = bwrapProbe(caps)
  const cg = detectCgroups()
  const v1 = Object.keys(cg.v1)
  const namespaceOk = bwrap.ok && caps.userns && caps.launcher !== null
  const ownTmpfs = ownTmpfsProbe(caps)
  const choice = autoChoice(caps, namespaceOk, ownTmpfs?.ok ?? true)
  const pool = uidPoolSchema.parse({})
  const debootstrap = resolveProgram('debootstrap', `${SAFE_PATH}:${process.env.PATH ?? ''}`, '/')
  const rootfsList = listRootfs()
  const checks: Check[] = [
    {
      name: 'bubblewrap',
      ok: bwrap.ok,
      detail: bwrap.detail,
      fix: bwrap.ok ? null : 'apt-get install -y bubblewrap (and allow unprivileged user namespaces)',
    },
    {
      name: 'user namespaces',
      ok: caps.userns,
      detail: caps.userns ? 'unprivileged user namespaces allowed' : (caps.usernsReason ?? ''),
      fix: caps.userns
        ? null
        : 'sysctl -w kernel.unprivileged_userns_clone=1 (or user.max_user_namespaces>0)',
    },
    {
      name: 'namespace tier',
      ok: namespaceOk,
      detail: namespaceOk
        ? "read-only root, private /tmp, private /run (host daemon sockets) unless network is host, own PID and network namespaces, cordon's /etc/passwd and /etc/group (user sandbox), dies with parent"
        : !caps.launcher
          ? "unavailable: cordon's launcher is not built (see process tier), so neither tier runs"
          : choice.picks === 'namespace'
            ? 'bubblewrap is installed and user namespaces are allowed, so isolation "auto" picks this tier, but it fails (see bubblewrap above): auto runs end `error` until it is fixed'
            : 'unavailable: isolation "auto" falls back to the process tier (below)',
      fix: namespaceOk
        ? null
        : caps.launcher
          ? 'fix bubblewrap and user namespaces above'
          : 'build the launcher (see process tier)',
    },
    {
      name: 'uid drop',
      ok: caps.isRoot,
      detail: caps.isRoot
        ? `running as root: each sandbox gets its own uid from ${pool.first}-${pool.first + pool.count - 1}`
        : 'not root: sandboxes run as this user and the process limit is not enforced; ' +
          (caps.seccompArch
            ? 'without a cgroup the process tier refuses setsid, so its session holds every process it starts'
            : 'without a cgroup, process-tier escapees (setsid) can outlive a run (no seccomp filter here)'),
      fix: caps.isRoot ? null : 'run cordon as root to give each sandbox an unprivileged uid of its own',
    },
    processTierCheck(caps, ownTmpfs),
    {
      name: 'landlock',
      ok: caps.landlock >= LANDLOCK_SCOPES,
      detail:
        caps.landlock === 0
          ? `${caps.launcher ? 'not offered by this kernel' : 'unknown (the launcher is not built)'}: process-tier sandboxes may write wherever their uid may`
          : `ABI ${caps.landlock}: process-tier sandboxes write only to their writable paths and own TMPDIR` +
            (caps.landlock >= LANDLOCK_SCOPES
              ? '; they cannot signal processes outside the sandbox or reach their abstract unix sockets'
              : '; signals and abstract unix sockets are not scoped (needs ABI 6)'),
      fix:
        caps.landlock >= LANDLOCK_SCOPES
          ? null
          : 'a kernel with Landlock enabled (Linux 6.12+ for ABI 6; lsm= must include landlock); the namespace tier does not need it',
    },
    {
      name: 'rlimits',
      ok: caps.launcher !== null,
      detail: caps.launcher
        ? "set by cordon's launcher in both tiers: CPU time, data size, file size, open files" +
          (caps.isRoot
            ? ', processes per sandbox uid'
            : ' (processes only as root: RLIMIT_NPROC counts all of a uid)')
        : `none: the launcher (${LAUNCHER_PATH}) is not built, so no sandbox runs`,
      fix: caps.launcher ? null : 'apt-get install -y gcc libc6-dev, then npm run build (native/build.sh)',
    },
    {
      name: 'cgroups',
      ok: caps.cgroup.version !== null,
      detail:
        caps.cgroup.version === 2
          ? `v2 under ${caps.cgroup.parent}: memory, processes and CPU time enforced on the whole sandbox, exact usage figures`
          : caps.cgroup.version === 1
            ? `v1 (${Object.values(caps.cgroup.parents).join(', ')}): memory, processes and CPU time enforced on the whole sandbox, exact usage figures`
            : `unusable (${caps.cgroup.reason}); found ${cg.v2 ? `v2 at ${cg.v2.mount}` : 'no v2'}, ${v1.length ? `v1 ${v1.join(' ')}` : 'no v1'}: ` +
              'memory, CPU time and processes are limited per process only (rlimits) and cpuMs/maxRssBytes are null',
      fix:
        caps.cgroup.version === null
          ? 'run cordon as root, or give it a delegated cgroup (cgroup.parent) with memory and pids controllers'
          : cg.favordynmods || caps.cgroup.version === 1
            ? null
            : 'optional, for latency: mount cgroups with favordynmods (or boot with cgroup_favordynmods=1) — on v2 moving a sandbox into its cgroup after an idle spell otherwise waits ~10 ms for an RCU grace period',
    },
    socketMemoryCheck(caps.cgroup.version, readText('/proc/cmdline')),
    openFilesCheck(
      readNumber('/proc/sys/fs/file-max', /^(\d+)/),
      readNumber('/proc/meminfo', /^MemTotal:\s+(\d+) kB/m) * 1024,
    ),
    seccompCheck(caps),
    {
      name: 'spawner',
      ok: isExecutableFile(SPAWNER_PATH),
      detail: isExecutableFile(SPAWNER_PATH)
        ? `${SPAWNER_PATH}: openSpawner() starts sandboxes without forking the host (optional)`
        : `not built (${SPAWNER_PATH}): openSpawner() throws; run() forks the host as without one`,
      fix: isExecutableFile(SPAWNER_PATH)
        ? null
        : 'apt-get install -y gcc musl-tools, then npm run build (native/build.sh)',
    },
    {
      name: 'network allowlist',
      ok: namespaceOk && caps.bridge !== null,
      detail:
        namespaceOk && caps.bridge
          ? `per-sandbox HTTP CONNECT and SOCKS5 proxies on unix sockets, bridged into the sandbox's own network namespace by ${caps.bridge} (each connection shows the run's token)`
          : !namespaceOk
            ? 'needs the namespace tier (a network namespace with no route out)'
            : "cordon's network bridge (native/cordon-bridge) is not built: `network: { allow }` is refused",
      fix:
        namespaceOk && caps.bridge
          ? null
          : namespaceOk
            ? 'apt-get install -y gcc musl-tools, then npm run build (native/build.sh)'
            : 'fix the namespace tier',
    },
    {
      name: 'root filesystems',
      ok: namespaceOk && debootstrap !== null,
      detail:
        `${rootfsList.length ? rootfsList.map((r) => `${r.name} (${r.os ?? 'unknown'})`).join(', ') : 'none built'} in ${rootfsCacheDir()}; ` +
        (debootstrap
          ? `debootstrap at ${debootstrap} builds new ones`
          : 'debootstrap is missing: `cordon rootfs create` cannot build'),
      fix: !namespaceOk
        ? 'fix the namespace tier (--rootfs needs it)'
        : debootstrap
          ? null
          : 'apt-get install -y debootstrap',
    },
    clockCheck(caps),
  ]
  const { autoTier, usable } = choice
  checks.push(
    pathsCheck(caps.isRoot, autoTier, realpathSync(process.cwd()), cordonPaths(), sandboxProbe(pool)),
  )
  return { capabilities: caps, autoTier, usable, checks }
}
