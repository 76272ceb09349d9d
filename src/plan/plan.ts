// Resolve a parsed policy against this machine into exactly what will be launched. Everything that can
// be refused (bad paths, denied command, missing tools) is decided here, before any process exists.
import { realpathSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { PolicyError } from '../errors.js'
import type { Capabilities } from '../host/capabilities.js'
import { type CgroupWrite, cgroupWrites } from '../host/cgroup-files.js'
import {
  type CgroupController,
  type CgroupSupport,
  cgroupDirs,
  joinFiles,
  ownCgroupView,
  sandboxCgroupName,
} from '../host/cgroups.js'
import { releaseScratch, SCRATCH_PREFIX, sweepStaleScratch } from '../host/scratch.js'
import { isSocket, recentHostSockets } from '../host/sockets.js'
import { claimUid, type UidLease } from '../host/uid-pool.js'
import { randomHex } from '../lazy.js'
import { HTTP_PROXY_PORT, SOCKS_PROXY_PORT } from '../net/proxy.js'
import { checkCommand, resolveRules } from '../policy/command.js'
import { buildEnv } from '../policy/env.js'
import type { Isolation, Violation } from '../policy/result.js'
import { defaultHide, type Policy } from '../policy/schema.js'
import { resolveRootfs } from '../rootfs/rootfs.js'
import { BRIDGE_PROCESSES, bridgeArgv } from './bridge.js'
import { bwrapArgs, covers, EXEC_INSIDE } from './bwrap.js'
import { clockEnv } from './clock.js'
import { IDENTITY_FDS, LOG_FD, pipedFds, SECCOMP_FD, STATUS_FD } from './fd-layout.js'
import { type IdentityPath, identityFiles } from './identity.js'
import { execStep, LANDLOCK_SCOPES, launcherArgv } from './launcher.js'
import {
  canSearch,
  enterableBy,
  hiddenPaths,
  PathFds,
  readableItselfBy,
  resolvePath,
  rootOnlyAbove,
  searchableBy,
  secretsOf,
  writableBy,
} from './paths.js'
import { processMounts, ROOT_TMPDIR } from './process-mounts.js'
import { rlimitArgs } from './rlimits.js'
import { HOST_IPC_CALLS, seccompProgram, seccompSupported, socketFamilies } from './seccomp.js'

/** Where the namespace tier's launcher attaches judged paths bwrap could not reach (see stage_fds). */
export const STAGE_DIR = ROOT_TMPDIR

export interface LaunchPlan {
  tier: Isolation
  file: string
  args: string[]
  env: Record<string, string>
  /** Host-side working directory of the launched helper. */
  cwd: string
  lease: UidLease | null
  /**
   * The sandbox's cgroup, when the machine offers one: cordon creates it with its limits before launch,
   * and the launcher (started as cordon, before it drops to the sandbox uid) joins it itself, v1 and v2
   * alike, before anything else runs. In the namespace tier bwrap's monitor and init are inside too.
   */
  cgroup: {
    support: Exclude<CgroupSupport, { version: null }>
    /** Its directory in each hierarchy (see `cgroupDirs`). */
    dirs: Map<CgroupController, string>
    writes: CgroupWrite[]
  } | null
  /**
   * The process tier's private TMPDIR (and HOME) on the host, made by the launcher and removed after the
   * run; null as root, where it is a tmpfs in the sandbox's own mount namespace and nothing is on the host.
   */
  scratch: string | null
  /** Limits that only hold per process (rlimits) because no cgroup covers the whole tree. */
  perProcessLimits: PerProcessLimit[]
  /** The seccomp program: bwrap reads it from SECCOMP_FD, the process tier's launcher from its argv. */
  seccomp: Buffer | null
  /** The fds beyond stdio cordon pipes (`pipedFds`); the launcher closes every other one it inherits. */
  fds: number[]
  /**
   * The judged paths the sandbox gets by fd (bwrap's --bind-fd, the launcher's Landlock rules), open on the
   * host until the sandbox has started: `pathFds.close()` then (releasePlan closes them too).
   */
  pathFds: PathFds
  /** One pipe as both stdout and stderr (the launcher makes fd 2 a copy of fd 1); cordon pipes no stderr. */
  mergeOutput: boolean
}

/** `tmpfsBytes`: the process tier's TMPDIR is a host directory (not as root): only each file is bounded. */
export type PerProcessLimit = 'cpuTimeMs' | 'memoryBytes' | 'maxProcesses' | 'tmpfsBytes'

const PROXY_ENV = {
  HTTP_PROXY: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  HTTPS_PROXY: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  http_proxy: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  https_proxy: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  ALL_PROXY: `socks5h://127.0.0.1:${SOCKS_PROXY_PORT}`,
  all_proxy: `socks5h://127.0.0.1:${SOCKS_PROXY_PORT}`,
}
export type Prepared =
  | { kind: 'launch'; plan: LaunchPlan }
  | { kind: 'refused'; tier: Isolation; violation: Violation }

/** What the namespace tier lacks on this machine, or null when it works. */
function namespaceMissing(caps: Capabilities): string | null {
  if (!caps.bwrap) return 'bubblewrap (bwrap) is not installed'
  return caps.userns ? null : `user namespaces are disabled (${caps.usernsReason})`
}

/** The tier `isolation` stands for on this machine: auto is the namespace tier when it works. */
export function tierFor(isolation: Policy['isolation'], caps: Capabilities): Isolation {
  return isolation === 'namespace' || (isolation === 'auto' && !namespaceMissing(caps))
    ? 'namespace'
    : 'process'
}

function chooseTier(policy: Policy, caps: Capabilities): { tier: Isolation; missing: string | null } {
  const nsMissing = namespaceMissing(caps)
  const tier = tierFor(policy.isolation, caps)
  const noLauncher = caps.launcher
    ? null
    : "cordon's launcher is not built (needs a C compiler: apt-get install -y gcc libc6-dev; npm run build)"
  return { tier, missing: (tier === 'namespace' ? nsMissing : null) ?? noLauncher }
}

/** `p` resolved, or `p` itself when it does not exist. */
function existingPathOr(p: string): string {
  try {
    return realpathSync(p)
  } catch {
    return p
  }
}

/**
 * Whether the process tier (network none) needs an empty network namespace: the seccomp filter refuses
 * all but unix sockets and a Landlock scope keeps out the host's abstract unix sockets; without both,
 * root still gets a namespace (it costs ~0.4 ms, so it is skipped when they do the job).
 */
export function processTierNetns(
  caps: Pick<Capabilities, 'isRoot' | 'landlock'>,
  filtered: boolean,
): boolean {
  return caps.isRoot && !(filtered && caps.landlock >= LANDLOCK_SCOPES)
}

/** Device files the process tier may write under Landlock (the namespace tier has a private /dev). */
export const DEVICES_WRITABLE = ['/dev/null', '/dev/zero', '/dev/full']

/**
 * Give back what a run took (its uid, its fds, its private TMPDIR) once it is over or called off. The TMPDIR: one
 * rmdir when empty or never made; what the sandbox left there goes through the launcher's no-follow
 * remover (plan.file is the launcher in both tiers).
 */
export async function releasePlan(plan: LaunchPlan): Promise<void> {
  plan.lease?.release()
  plan.pathFds.close()
  if (plan.scratch) await releaseScratch(plan.file, plan.scratch)
}

/**
 * `visible`: given only for a called function: paths that must be readable in the sandbox besides the cwd
 * (its module); the run then also pipes the function's request and reply.
 * `netDir`: the directory holding this run's proxy sockets, when the network is an allowlist.
 */
export function prepare(
  command: readonly string[],
  policy: Policy,
  caps: Capabilities,
  visible?: readonly string[],
  netDir?: string,
): Prepared {
  const env: Record<string, string> = {
    ...buildEnv(process.env, policy.passEnv, policy.env),
    CORDON_LOG_FD: String(LOG_FD),
  }
  // Resolved here (no symlink left, none a sandbox planted); opened and judged on the fd further down.
  const cwd = resolvePath('cwd', path.resolve(policy.cwd ?? process.cwd()))
  const writable = policy.writable.map((p, i) => {
    const real = resolvePath(`writable.${i}`, path.resolve(cwd, p))
    if (covers('/proc', real)) {
      throw new PolicyError(
        `writable.${i}`,
        `${real} is under /proc, the kernel's view of processes: never writable`,
      )
    }
    return real
  })
  const readable = policy.readable?.map((p, i) => resolvePath(`readable.${i}`, path.resolve(cwd, p)))
  const searchPath = env.PATH ?? ''
  // Programs are looked up where the sandbox will look: in the other root filesystem, when there is one.
  const rootfs = policy.rootfs ? resolveRootfs(policy.rootfs) : null
  const root = rootfs?.dir ?? '/'
  const allow = resolveRules('allow', policy.allow, searchPath, cwd, root)
  const deny = resolveRules('deny', policy.deny, searchPath, cwd, root)

  const { tier, missing } = chooseTier(policy, caps)
  const refuse = (violation: Violation): Prepared => ({ kind: 'refused', tier, violation })
  if (missing) {
    return refuse({ kind: 'error', limit: 'isolation', message: `${tier} tier unavailable: ${missing}` })
  }
  const proxied = typeof policy.network === 'object'
  // What the policy asks for that this tier or machine cannot give: refused, never silently dropped.
  const unmet: [boolean, string, string][] = [
    [
      policy.denySyscalls.length > 0 && !seccompSupported(),
      'denySyscalls',
      `cordon builds seccomp filters for x86_64 only, this is ${process.arch}`,
    ],
    [
      policy.clock !== undefined && !caps.faketime,
      'clock',
      'clock needs libfaketime: apt-get install -y faketime',
    ],
    [proxied && tier === 'process', 'network', 'a network allowlist needs the namespace tier'],
    [
      proxied && !caps.bridge,
      'network',
      "a network allowlist needs cordon's network bridge (native/cordon-bridge): apt-get install -y gcc musl-tools, then npm run build",
    ],
    [rootfs !== null && tier === 'process', 'rootfs', 'another root filesystem needs the namespace tier'],
    [
      readable !== undefined && tier === 'process',
      'readable',
      'readable (strict mode) needs the namespace tier',
    ],
    [
      policy.cgroup.mode === 'auto' && policy.cgroup.parent !== undefined && caps.cgroup.version === null,
      'cgroup',
      `cgroup.parent ${policy.cgroup.parent} cannot hold sandboxes: ${caps.cgroup.version === null ? caps.cgroup.reason : ''}`,
    ],
    [
      (policy.hide?.length ?? 0) > 0 && tier === 'process',
      'hide',
      'hide needs the namespace tier (the process tier hides no paths)',
    ],
  ]
  const blocker = unmet.find(([blocked]) => blocked)
  if (blocker) return refuse({ kind: 'error', limit: blocker[1], message: blocker[2] })
  // The clock's variables reach only the program (through `env`, the last exec before it, or the static
  // launcher's own environment): launchers that start as root must not load libfaketime, whose state they
  // would leave unreadable to the sandbox.
  const clock = policy.clock ? clockEnv(policy.clock.start, caps.faketime!, env) : null
  if (clock) env.TZ = clock.TZ
  const check = checkCommand(command[0]!, searchPath, cwd, allow, deny, root)
  if (!check.ok) return refuse({ kind: check.kind, limit: check.limit, message: check.message })

  const lease = caps.isRoot ? claimUid(policy.uidPool) : null
  if (caps.isRoot && !lease) {
    const { first, count } = policy.uidPool
    return refuse({
      kind: 'error',
      limit: 'uidPool',
      message: `all ${count} sandbox uids from ${first} are in use: wait for a run to end, or give uidPool more`,
    })
  }
  const pathFds = new PathFds()
  try {
    // Every path is judged on the fd that is then bound (or made a Landlock rule): what changes under its
    // name after this cannot change what the sandbox gets.
    const cwdOpened = pathFds.open('cwd', cwd, { dir: true })
    // Directories above it that the sandbox uid cannot search are covered (see blockedDirs); the cwd
    // itself it must be able to enter, or every relative path fails in it.
    if (lease && !enterableBy(cwdOpened, lease.uid, lease.gid)) {
      throw new PolicyError(
        'cwd',
        `${cwd} cannot be entered by the sandbox user (a uid from ${policy.uidPool.first}, gid ${lease.gid}); ` +
          `chmod o+x ${cwd}, or start cordon (or give cwd) elsewhere`,
      )
    }
    for (const [i, real] of (readable ?? []).entries()) pathFds.open(`readable.${i}`, real)
    const shown = (visible ?? []).map((p) => resolvePath('module', p))
    for (const dir of shown) {
      const opened = pathFds.open('module', dir)
      // Directories above it that the sandbox uid cannot search are covered, the path shown in them
      // (see blockedDirs): only its own mode is the sandbox's to live with.
      if (lease && !readableItselfBy(opened, lease.uid, lease.gid)) {
        throw new PolicyError(
          'module',
          `${dir} is not readable by the sandbox user (a uid from ${policy.uidPool.first}, gid ${lease.gid}); ` +
            'make it world-readable (or group-readable for that gid)',
        )
      }
    }
    // bwrap binds the bridge in by fd, like the paths the policy names (staged when out of its reach).
    const bridge = proxied && tier === 'namespace' ? resolvePath('network', caps.bridge!) : null
    if (bridge) pathFds.open('network', bridge)
    for (const [i, real] of writable.entries()) {
      const opened = pathFds.open(`writable.${i}`, real)
      if (lease && !writableBy(opened, lease.uid, lease.gid)) {
        throw new PolicyError(
          `writable.${i}`,
          `${real} is not writable by the sandbox user (a uid from ${policy.uidPool.first}, gid ${lease.gid}); ` +
            `make it group-writable for gid ${lease.gid} or world-writable`,
        )
      }
    }
    // bwrap's monitor and init, and the network bridge, are in the sandbox's cgroup and uid too.
    const overheadProcesses = (tier === 'namespace' ? 2 : 0) + (proxied ? BRIDGE_PROCESSES : 0)
    const support = policy.cgroup.mode === 'auto' ? caps.cgroup : null
    const cgroup = support?.version
      ? {
          support,
          dirs: cgroupDirs(support, sandboxCgroupName()),
          writes: cgroupWrites(support.version, policy.limits, overheadProcesses),
        }
      : null
    const rlimits = rlimitArgs(policy.limits, {
      ownUid: lease !== null,
      overheadProcesses,
      cgroup: cgroup !== null,
    })
    // The process tier's launcher is static (no loader to run libfaketime) and the last exec before the
    // program: the clock's variables are simply its environment, without `env`.
    if (clock && tier === 'process') Object.assign(env, clock)
    const clockStep = clock !== null && tier === 'namespace'
    // What runs is the judged real path, never the name as found (which a sandbox may swap meanwhile);
    // argv[0] stays the name as found. The process tier's launcher sets it itself; in the namespace tier
    // (bwrap, env and the bridge cannot) the launcher is one more exec step, only when the two differ
    // (a symlink), bound by fd at its fixed place in the sandbox's own /dev: the sandbox uid needs no
    // search permission on the directories cordon is installed in.
    const direct = check.real === check.program
    const launcherSetsArgv0 = tier === 'process'
    const stepFile = direct || launcherSetsArgv0 ? null : resolvePath('command', caps.launcher!)
    // Whether the sandbox uid can search every directory above a judged path (else it is out of bwrap's
    // reach by the path its fd names, and the launcher stages it) and a given directory itself.
    const blockedAbove = (p: string) => lease !== null && !searchableBy(path.dirname(p), lease.uid, lease.gid)
    const searchable = lease ? (dir: string) => canSearch(dir, lease.uid, lease.gid) : undefined
    if (stepFile) pathFds.open('command', stepFile)
    const target = stepFile ? execStep(EXEC_INSIDE, check.program, check.real) : [check.real]
    // With an allowlist, cordon's bridge (bound in, so on any root filesystem) starts first, then execs the program.
    const withClock = clockStep
      ? [caps.env!, ...Object.entries(clock).map(([k, v]) => `${k}=${v}`), ...target]
      : target
    const program = proxied
      ? bridgeArgv([...withClock, ...command.slice(1)])
      : [...withClock, ...command.slice(1)]
    if (proxied) Object.assign(env, PROXY_ENV)
    const noNetwork = policy.network === 'none'
    const sessionBound = tier === 'process' && lease === null && cgroup === null
    // Only root can give the process tier an IPC namespace (the namespace tier always has one).
    const ownIpc = tier === 'namespace' || caps.isRoot
    const seccomp = seccompSupported()
      ? seccompProgram({
          extraDenied: [
            ...policy.denySyscalls,
            // With neither a uid nor a cgroup of its own, the process tier's session is the only thing that
            // marks its processes: leaving it would let one outlive the run and hold its pipes open.
            ...(sessionBound ? ['setsid'] : []),
            // The host's IPC namespace: what a sandbox made there would outlive it, shared with the host.
            ...(ownIpc ? [] : HOST_IPC_CALLS),
          ],
          // Families a sandbox has no need of are refused in every tier; without a network namespace of
          // its own, the process tier is kept off the network by the filter.
          socketFamilies: socketFamilies(tier, proxied ? 'allowlist' : noNetwork ? 'none' : 'host'),
        })
      : null
    // One launcher for both tiers: rlimits, the cgroup and the uid, then bwrap or the tier's own fences.
    let scratch: string | null = null
    let mounts: ReturnType<typeof processMounts> | null = null
    let inner: readonly string[] = program
    /** Which of cordon's own /etc files bwrap shows (the rest are the tree's, listed or hidden). */
    const identityShown: IdentityPath[] = []
    // The judged paths the launcher stages (see stageFds below), decided once: the cover of STAGE_DIR
    // in the sandbox and the staging itself must not rest on two lookups a chmod could fall between.
    const staged = new Set(
      tier === 'namespace'
        ? [cwd, ...writable, ...(readable ?? []), ...shown, stepFile ?? '/', bridge ?? '/'].filter(
            blockedAbove,
          )
        : [],
    )
    if (tier === 'namespace') {
      // Only bwrap hides paths (the process tier does not): resolved only for it.
      const hide = hiddenPaths((policy.hide ?? defaultHide()).map((p) => path.resolve(cwd, p)))
      // A hidden directory shown all the same (cordon started from the home) keeps its dot-entries hidden.
      // Directories above it the sandbox uid cannot search are covered (see blockedDirs): only its own mode counts.
      const reachable = (dir: string) => !lease || canSearch(dir, lease.uid, lease.gid)
      hide.push(...secretsOf(hide, [cwd, ...writable, ...(readable ?? [])], reachable))
      const network = policy.network === 'host' ? 'host' : 'none'
      inner = [
        caps.bwrap!,
        ...bwrapArgs({
          writable,
          cwd,
          visible: shown,
          network,
          ...(netDir && bridge ? { netDir, bridge } : {}),
          tmpfsBytes: policy.limits.tmpfsBytes,
          hide,
          ...(rootfs ? { rootfs } : {}),
          ...(readable ? { readable } : {}),
          ...(seccomp ? { seccompFd: SECCOMP_FD } : {}),
          statusFd: STATUS_FD,
          fdFor: (p) => pathFds.pass(p),
          ...(stepFile ? { execStep: stepFile } : {}),
          ...(network === 'none' ? { sockets: recentHostSockets(), socketLive: isSocket } : {}),
          cgroups: ownCgroupView(cgroup),
          identityFd: (p) => {
            identityShown.push(p)
            return IDENTITY_FDS[p]
          },
          ...(searchable ? { searchable } : {}),
          ...(staged.size > 0 ? { stageDir: STAGE_DIR } : {}),
        }),
        '--',
        ...program,
      ]
    } else if (caps.isRoot) {
      // A mount namespace of its own: TMPDIR and /dev/shm are tmpfs bounded by tmpfsBytes, /proc shows
      // its own processes only; nothing of its scratch is ever on the host, so nothing there to remove.
      mounts = processMounts({
        network: noNetwork ? 'none' : 'host',
        shown: [cwd, ...shown],
        writable,
        shm: existingPathOr('/dev/shm'),
        ...(searchable ? { searchable } : {}),
      })
      // The launcher mounts on a directory only when no one but root can swap a name above it, and mounts
      // every cover before the paths it shows again: not one inside such a path.
      for (const dir of mounts.blocked) {
        const inside = mounts.keeps.find((k) => k !== dir && covers(k, dir))
        if (rootOnlyAbove(dir) && !inside) continue
        const named: [string, string][] = [
          ['cwd', cwd],
          ...writable.map((p, i): [string, string] => [`writable.${i}`, p]),
          ...shown.map((p): [string, string] => ['module', p]),
        ]
        const [field, real] = named.find(([, p]) => covers(dir, p)) ?? ['cwd', cwd]
        const why = inside
          ? `inside ${inside}, which it is shown: the process tier cannot cover it there`
          : 'and the process tier covers such a directory only when nobody but root can write above it'
        throw new PolicyError(
          field,
          `${real} lies beneath ${dir}, which the sandbox user (a uid from ${policy.uidPool.first}) cannot search, ${why}; ` +
            `chmod o+x ${dir}, or use the namespace tier`,
        )
      }
    } else {
      const tmp = os.tmpdir()
      // Named after this process, so the next cordon removes it if this one dies mid-run.
      sweepStaleScratch(caps.launcher!, tmp)
      scratch = path.join(tmp, `${SCRATCH_PREFIX}${process.pid}-${randomHex(16)}`)
    }
    if (tier === 'process') {
      for (const name of ['TMPDIR', 'HOME']) {
        if (!Object.hasOwn(policy.env, name) && !policy.passEnv.includes(name))
          env[name] = scratch ?? ROOT_TMPDIR
      }
    }
    // Its own user, with the HOME it now has: the run's uid, or (namespace tier, not as root) this user's,
    // which bwrap maps to itself. The process tier not as root has no mount namespace: the host's stay.
    const who = lease ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }
    const identity = identityFiles(who.uid, who.gid, env.HOME ?? '/')
    const fenced = tier === 'process'
    const landlockFs = fenced && caps.landlock >= 1
    // Landlock's rules for the judged writable paths are made from their fds, not by opening the names again.
    const writableFds = landlockFs ? writable.map((p) => pathFds.pass(p)) : []
    // The process tier's paths shown again beneath its covers, from the fds they were judged on.
    const keeps = mounts ? mounts.keeps.map((p) => ({ fd: pathFds.pass(p), path: p })) : []
    // The process tier's program inherits the launcher's cwd: entered from the fd it was judged on.
    const cwdFd = fenced ? pathFds.pass(cwd) : undefined
    // bwrap reaches a judged path by the path its fd names, as the sandbox uid: one beneath a directory that
    // uid cannot search is staged by the launcher.
    const stageFds = pathFds.passed.filter((p) => staged.has(p.path)).map((p) => p.child)
    pathFds.closeUnpassed()
    const fds = pipedFds(tier, seccomp !== null, visible !== undefined, proxied)
    const argv = launcherArgv({
      launcher: caps.launcher!,
      keepFds: [...fds, ...pathFds.passed.map((p) => p.child)],
      rlimits,
      join: cgroup ? joinFiles(cgroup.support.version, cgroup.dirs) : [],
      scratch,
      unshareNet: fenced && noNetwork && processTierNetns(caps, seccomp !== null),
      // Shared memory would otherwise outlive the run on the host, holding memory and data for the next.
      unshareIpc: fenced && ownIpc,
      mounts: mounts && {
        ...mounts,
        keeps,
        tmpfsBytes: policy.limits.tmpfsBytes,
        files: mounts.identity.map((p) => ({ path: p, content: identity[p] })),
      },
      memfds: identityShown.map((p) => ({ fd: IDENTITY_FDS[p], content: identity[p] })),
      stageFds,
      drop: lease && { uid: lease.uid, gid: lease.gid },
      writable: landlockFs ? [...(mounts ? mounts.writable : [scratch!]), ...DEVICES_WRITABLE] : null,
      writableFds,
      scope: {
        signals: fenced && caps.landlock >= LANDLOCK_SCOPES,
        abstractUnix: fenced && caps.landlock >= LANDLOCK_SCOPES && noNetwork,
      },
      // bwrap installs the namespace tier's filter itself, from SECCOMP_FD, after its own set-up.
      seccomp: fenced ? seccomp : null,
      bwrapEnv: !fenced,
      // bwrap is the namespace tier's monitor.
      monitor: fenced,
      // The session marks the sandbox's processes only while its leader, the monitor, lives.
      killSession: sessionBound,
      mergeStderr: policy.mergeOutput,
      ...(cwdFd !== undefined ? { cwdFd } : {}),
      ...(launcherSetsArgv0 && !direct ? { argv0: check.program } : {}),
      program: inner,
    })
    return {
      kind: 'launch',
      plan: {
        tier,
        file: argv[0]!,
        args: argv.slice(1),
        env,
        // Never the cwd by name: bwrap enters it inside the sandbox, the process tier's launcher by its fd.
        cwd: '/',
        lease,
        cgroup,
        scratch,
        perProcessLimits: [
          ...(cgroup ? [] : (['cpuTimeMs', 'memoryBytes', 'maxProcesses'] as const)),
          // A host directory, not a tmpfs, without a mount namespace: RLIMIT_FSIZE bounds each file only.
          ...(scratch ? (['tmpfsBytes'] as const) : []),
        ],
        seccomp,
        fds,
        pathFds,
        mergeOutput: policy.mergeOutput,
      },
    }
  } catch (error) {
    lease?.release()
    pathFds.close()
    throw error
  }
}
