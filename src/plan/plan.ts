// Resolve a parsed policy against this machine into exactly what will be launched. Everything that can
// be refused (bad paths, denied command, missing tools) is decided here, before any process exists.
// prepare() reads as its steps; the tier's own launch is built in namespace.ts or process.ts.
import path from 'node:path'
import { PolicyError } from '../errors.js'
import type { Capabilities } from '../host/capabilities.js'
import { cgroupWrites } from '../host/cgroup-files.js'
import { cgroupDirs, joinFiles, sandboxCgroupName } from '../host/cgroups.js'
import { releaseScratch } from '../host/scratch.js'
import { claimUid, type UidLease } from '../host/uid-pool.js'
import { checkCommand, resolveRules } from '../policy/command.js'
import { buildEnv } from '../policy/env.js'
import type { Isolation, PerProcessLimit, Violation } from '../policy/result.js'
import type { Policy } from '../policy/schema.js'
import { formatBytes } from '../policy/units.js'
import { resolveRootfs } from '../rootfs/rootfs.js'
import { BRIDGE_PROCESSES } from './bridge.js'
import { covers } from './bwrap.js'
import { type ClockEnv, clockEnv } from './clock.js'
import type { CgroupPlan, NamedPaths, PlanContext, TierLaunch } from './context.js'
import { LOG_FD, pipedFds } from './fd-layout.js'
import { launcherArgv } from './launcher.js'
import { namespaceLaunch } from './namespace.js'
import {
  enterableBy,
  PathFds,
  type ResolvedPath,
  readableItselfBy,
  resolveNamedPath,
  resolvePath,
  writableBy,
} from './paths.js'
import { processLaunch } from './process.js'
import { rlimitArgs } from './rlimits.js'
import { HOST_IPC_CALLS, seccompProgram, socketFamilies } from './seccomp.js'
import { coldReason, type WarmPlan, type WarmRequest, warmKey } from './warm.js'

export interface LaunchPlan {
  tier: Isolation
  file: string
  args: string[]
  env: Record<string, string>
  /** Host-side working directory of the launched helper. */
  cwd: string
  lease: UidLease | null
  /** The sandbox's cgroup, when the machine offers one (see CgroupPlan). */
  cgroup: CgroupPlan | null
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
  /** Built with `warm`: a member's launch (program: cordon-await), its key and the run's record. */
  warm: WarmPlan | null
}

export type Prepared =
  | { kind: 'launch'; plan: LaunchPlan }
  | { kind: 'refused'; tier: Isolation; violation: Violation }
/** With `warm`, also: this run cannot have a warm member (prepare it without). */
export type PreparedWarm = Prepared | { kind: 'cold'; reason: string }

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
 * The steps, in order: the environment and the named paths; the tier; what this machine or tier cannot
 * enforce (refused); the command, judged; a uid from the pool; every path opened and judged on its fd; the
 * cgroup and rlimits; the seccomp filter; then the tier's own module builds its launch (namespace.ts or
 * process.ts) and one launcher argv wraps it. Refusals come back as results; a caller's mistake throws
 * PolicyError, with nothing left held.
 *
 * `visible`: given only for a called function: paths that must be readable in the sandbox besides the cwd
 * (its module); the run then also pipes the function's request and reply.
 * `netDir`: the directory holding this run's proxy sockets, when the network is an allowlist.
 * `warm`: the plan of a warm member (see warm.ts): a new one's (`seed` null, and no command: nothing is
 * judged of a program), or this run's as if it were the member `seed`'s (its uid and cgroup); 'cold' when
 * this run can have none.
 */
export function prepare(
  command: readonly string[],
  policy: Policy,
  caps: Capabilities,
  visible?: readonly string[],
  netDir?: string,
): Prepared
export function prepare(
  command: readonly string[] | null,
  policy: Policy,
  caps: Capabilities,
  visible: undefined,
  netDir: undefined,
  warm: WarmRequest,
): PreparedWarm
export function prepare(
  command: readonly string[] | null,
  policy: Policy,
  caps: Capabilities,
  visible?: readonly string[],
  netDir?: string,
  warm?: WarmRequest,
): PreparedWarm {
  const env = sandboxEnv(policy)
  const named = resolveNamed(policy)
  const lookup = commandLookup(policy, env, named)

  const { tier, missing } = chooseTier(policy, caps)
  const refuse = (violation: Violation): PreparedWarm => ({ kind: 'refused', tier, violation })
  if (missing) {
    return refuse({ kind: 'error', limit: 'isolation', message: `${tier} tier unavailable: ${missing}` })
  }
  const unmet = unmetNeed(policy, caps, tier, named)
  if (unmet) return refuse(unmet)
  const cold = warm && coldReason(tier, visible !== undefined, allowlisted(policy))
  if (cold) return { kind: 'cold', reason: cold }
  const clock = clockFor(policy, caps, env)
  const { searchPath, allow, deny, root } = lookup
  const check =
    command === null
      ? ({ ok: true, program: '', real: '' } as const)
      : checkCommand(command[0]!, searchPath, named.cwd, allow, deny, root)
  if (!check.ok) return refuse({ kind: check.kind, limit: check.limit, message: check.message })
  // A member's uid is the member's: never claimed here, never given back by a plan that failed.
  const lease = warm?.seed ? warm.seed.lease : leaseUid(policy, caps)
  if (lease === 'exhausted') return refuse(poolExhausted(policy))

  const pathFds = new PathFds()
  try {
    const { shown, bridge } = judgePaths(policy, caps, tier, named, visible, lease, pathFds)
    const cgroupName = warm?.seed ? warm.seed.cgroupName : sandboxCgroupName()
    const { cgroup, rlimits } = cgroupAndRlimits(policy, caps, tier, lease, cgroupName)
    const ctx: PlanContext = {
      command: command ?? [],
      policy,
      caps,
      env,
      named,
      shown,
      bridge,
      check,
      clock,
      lease,
      cgroup,
      pathFds,
      netDir,
      proxied: allowlisted(policy),
      warm: warm !== undefined,
      ...filterFor(policy, caps, tier, lease, cgroup),
    }
    const own = tier === 'namespace' ? namespaceLaunch(ctx) : processLaunch(ctx)
    const plan = launchPlan(tier, ctx, own, rlimits, visible !== undefined)
    if (warm) plan.warm = warmPlan(plan, ctx, rlimits, command === null ? null : check, cgroupName)
    return { kind: 'launch', plan }
  } catch (error) {
    if (!warm?.seed) lease?.release()
    pathFds.close()
    throw error
  }
}

/**
 * A plan built with `warm`: its key, and the run's activation record: the program at its judged real path
 * (argv[0] the name found, when they differ, as the exec step gives it) and its environment, the clock's
 * variables in it (cordon-await is static: they reach the program alone, as `env` gives them cold), and
 * PWD as bwrap sets it.
 */
function warmPlan(
  plan: LaunchPlan,
  ctx: PlanContext,
  rlimits: string[],
  check: { program: string; real: string } | null,
  cgroupName: string | null,
): WarmPlan {
  const key = warmKey(plan.file, plan.args, plan.seccomp, ctx.policy.uidPool)
  const activation = check && {
    file: check.real,
    argv: [check.real === check.program ? check.real : check.program, ...ctx.command.slice(1)],
    // bwrap sets PWD to the directory it enters, over the policy's: cold, the program gets it so.
    env: { ...ctx.env, ...(ctx.clock ?? {}), PWD: ctx.named.cwd },
    rlimits,
  }
  return { key, cgroupName, activation }
}

/** The policy's environment for the program, with the number of its log channel. */
function sandboxEnv(policy: Policy): Record<string, string> {
  return { ...buildEnv(process.env, policy.passEnv, policy.env), CORDON_LOG_FD: String(LOG_FD) }
}

/**
 * The paths the policy names, resolved here (no symlink left, none a sandbox planted); opened and judged on
 * their fds in judgePaths. Throws a PolicyError naming the field.
 */
function resolveNamed(policy: Policy): NamedPaths {
  const resolved: ResolvedPath[] = []
  const resolve = (field: string, given: string) => {
    const r = resolveNamedPath(field, given)
    resolved.push(r)
    return r.path
  }
  const cwd = resolve('cwd', path.resolve(policy.cwd ?? process.cwd()))
  const writable = policy.writable.map((p, i) => {
    const real = resolve(`writable.${i}`, path.resolve(cwd, p))
    if (covers('/proc', real)) {
      throw new PolicyError(
        `writable.${i}`,
        `${real} is under /proc, the kernel's view of processes: never writable`,
      )
    }
    return real
  })
  const readable = policy.readable?.map((p, i) => resolve(`readable.${i}`, path.resolve(cwd, p)))
  // The tree is resolved as the rest (a symlink a sandbox planted refused); its directories are bound by
  // the fds judgePaths opens.
  const tree = policy.rootfs ? resolveRootfs(policy.rootfs) : null
  const rootfs = tree && { ...tree, dir: resolvePath('rootfs', tree.dir) }
  return { cwd, writable, readable, rootfs, resolved }
}

/**
 * Where the command is looked up and what it is judged against: the sandbox's PATH, in the other root
 * filesystem when there is one (where the sandbox will look), and the allow and deny rules resolved there.
 */
function commandLookup(policy: Policy, env: Record<string, string>, named: NamedPaths) {
  const searchPath = env.PATH ?? ''
  const root = named.rootfs?.dir ?? '/'
  const allow = resolveRules('allow', policy.allow, searchPath, named.cwd, root)
  const deny = resolveRules('deny', policy.deny, searchPath, named.cwd, root)
  return { searchPath, root, allow, deny }
}

/** A network allowlist: the namespace tier with the bridge and the run's proxies. */
function allowlisted(policy: Policy): boolean {
  return typeof policy.network === 'object'
}

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

/** The tier, and what this machine lacks for it: a tier asked for by name is never swapped for the other. */
function chooseTier(policy: Policy, caps: Capabilities): { tier: Isolation; missing: string | null } {
  const nsMissing = namespaceMissing(caps)
  const tier = tierFor(policy.isolation, caps)
  const noLauncher = caps.launcher
    ? null
    : "cordon's launcher is not built (needs a C compiler: apt-get install -y gcc libc6-dev; npm run build)"
  return { tier, missing: (tier === 'namespace' ? nsMissing : null) ?? noLauncher }
}

/** What the policy asks for that this tier or machine cannot give: refused, never silently dropped. */
function unmetNeed(policy: Policy, caps: Capabilities, tier: Isolation, named: NamedPaths): Violation | null {
  const proxied = allowlisted(policy)
  const unmet: [boolean, string, string][] = [
    [
      policy.denySyscalls.length > 0 && caps.seccompArch === null,
      'denySyscalls',
      `cordon builds seccomp filters for x86_64 and aarch64 only, this is ${process.arch}`,
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
    [
      named.rootfs !== null && tier === 'process',
      'rootfs',
      'another root filesystem needs the namespace tier',
    ],
    [
      named.readable !== undefined && tier === 'process',
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
    [
      // Its TMPDIR would be a directory on the host's disk, bounded per file only (a run wrote 3 x its
      // tmpfsBytes): refused rather than promised and not kept.
      tier === 'process' && !caps.isRoot && !caps.userns,
      'limits.tmpfsBytes',
      `the process tier not as root bounds its TMPDIR (${formatBytes(policy.limits.tmpfsBytes)}) with a tmpfs in a ` +
        `user namespace of its own, and this machine allows none (${caps.usernsReason}): allow unprivileged user ` +
        'namespaces, or run cordon as root',
    ],
  ]
  const blocker = unmet.find(([blocked]) => blocked)
  return blocker ? { kind: 'error', limit: blocker[1], message: blocker[2] } : null
}

/**
 * The clock's variables, for the program alone (the tier decides how they reach it): launchers that start
 * as root must not load libfaketime, whose state they would leave unreadable to the sandbox. Only TZ is
 * everyone's, in `env`.
 */
function clockFor(policy: Policy, caps: Capabilities, env: Record<string, string>): ClockEnv | null {
  const clock = policy.clock ? clockEnv(policy.clock.start, caps.faketime!, env) : null
  if (clock) env.TZ = clock.TZ
  return clock
}

/** As root, each run gets a uid of its own from the pool (else it runs as this user): 'exhausted' when none is free. */
function leaseUid(policy: Policy, caps: Capabilities): UidLease | null | 'exhausted' {
  if (!caps.isRoot) return null
  return claimUid(policy.uidPool) ?? 'exhausted'
}

function poolExhausted(policy: Policy): Violation {
  const { first, count } = policy.uidPool
  return {
    kind: 'error',
    limit: 'uidPool',
    message: `all ${count} sandbox uids from ${first} are in use: wait for a run to end, or give uidPool more`,
  }
}

/**
 * Open every path the sandbox gets and judge it on that fd, which is then bound (or made a Landlock rule):
 * what changes under its name after this cannot change what the sandbox gets. As root, the sandbox uid must
 * be able to use each as asked. Returns the called function's module paths and the network bridge, judged.
 */
function judgePaths(
  policy: Policy,
  caps: Capabilities,
  tier: Isolation,
  named: NamedPaths,
  visible: readonly string[] | undefined,
  lease: UidLease | null,
  pathFds: PathFds,
): { shown: string[]; bridge: string | null } {
  const { cwd, writable, readable } = named
  const sandboxUser = (gid: number) => `the sandbox user (a uid from ${policy.uidPool.first}, gid ${gid})`
  const cwdOpened = pathFds.open('cwd', cwd, { dir: true })
  // Directories above it that the sandbox uid cannot search are covered (see blockedDirs); the cwd
  // itself it must be able to enter, or every relative path fails in it.
  if (lease && !enterableBy(cwdOpened, lease.uid, lease.gid)) {
    throw new PolicyError(
      'cwd',
      `${cwd} cannot be entered by ${sandboxUser(lease.gid)}; ` +
        `chmod o+x ${cwd}, or start cordon (or give cwd) elsewhere`,
    )
  }
  for (const [i, real] of (readable ?? []).entries()) pathFds.open(`readable.${i}`, real)
  // The tree's top-level directories, each the directory listed (a symlink swapped in since is refused).
  for (const e of named.rootfs?.entries ?? []) {
    if (e.symlink === null) pathFds.open('rootfs', path.join(named.rootfs!.dir, e.name), { dir: true })
  }
  const shown = (visible ?? []).map((p) => {
    const r = resolveNamedPath('module', p)
    named.resolved.push(r)
    return r.path
  })
  for (const dir of shown) {
    const opened = pathFds.open('module', dir)
    // Directories above it that the sandbox uid cannot search are covered, the path shown in them
    // (see blockedDirs): only its own mode is the sandbox's to live with.
    if (lease && !readableItselfBy(opened, lease.uid, lease.gid)) {
      throw new PolicyError(
        'module',
        `${dir} is not readable by ${sandboxUser(lease.gid)}; ` +
          'make it world-readable (or group-readable for that gid)',
      )
    }
  }
  // bwrap binds the bridge in by fd, like the paths the policy names (staged when out of its reach).
  const bridge = allowlisted(policy) && tier === 'namespace' ? resolvePath('network', caps.bridge!) : null
  if (bridge) pathFds.open('network', bridge)
  for (const [i, real] of writable.entries()) {
    const opened = pathFds.open(`writable.${i}`, real)
    if (lease && !writableBy(opened, lease.uid, lease.gid)) {
      throw new PolicyError(
        `writable.${i}`,
        `${real} is not writable by ${sandboxUser(lease.gid)}; ` +
          `make it group-writable for gid ${lease.gid} or world-writable`,
      )
    }
  }
  return { shown, bridge }
}

/**
 * The sandbox's cgroup when the policy wants one and the machine offers it, and the rlimits: with no
 * cgroup over the whole tree, the limits fall back to per-process ones.
 */
function cgroupAndRlimits(
  policy: Policy,
  caps: Capabilities,
  tier: Isolation,
  lease: UidLease | null,
  name: string | null,
): { cgroup: CgroupPlan | null; rlimits: string[] } {
  // bwrap's monitor and init, and the network bridge, are in the sandbox's cgroup and uid too.
  const overheadProcesses = (tier === 'namespace' ? 2 : 0) + (allowlisted(policy) ? BRIDGE_PROCESSES : 0)
  const support = policy.cgroup.mode === 'auto' ? caps.cgroup : null
  // A member made without a cgroup has none to give a run: its run has none either, or it is cold (key).
  const cgroup =
    support?.version && name !== null
      ? {
          support,
          dirs: cgroupDirs(support, name),
          writes: cgroupWrites(support.version, policy.limits, overheadProcesses),
        }
      : null
  const rlimits = rlimitArgs(policy.limits, {
    ownUid: lease !== null,
    overheadProcesses,
    cgroup: cgroup !== null,
  })
  return { cgroup, rlimits }
}

/** The seccomp program, and the two facts about the sandbox it depends on. */
function filterFor(
  policy: Policy,
  caps: Capabilities,
  tier: Isolation,
  lease: UidLease | null,
  cgroup: CgroupPlan | null,
): { seccomp: Buffer | null; sessionBound: boolean; ownIpc: boolean } {
  // With neither a uid nor a cgroup of its own, the process tier's session is the only thing that marks
  // its processes: leaving it would let one outlive the run and hold its pipes open.
  const sessionBound = tier === 'process' && lease === null && cgroup === null
  // Only root can give the process tier an IPC namespace (the namespace tier always has one).
  const ownIpc = tier === 'namespace' || caps.isRoot
  const network = allowlisted(policy) ? 'allowlist' : policy.network === 'none' ? 'none' : 'host'
  const seccomp = caps.seccompArch
    ? seccompProgram(caps.seccompArch, {
        extraDenied: [
          ...policy.denySyscalls,
          ...(sessionBound ? ['setsid'] : []),
          // The host's IPC namespace: what a sandbox made there would outlive it, shared with the host.
          ...(ownIpc ? [] : HOST_IPC_CALLS),
        ],
        // Families a sandbox has no need of are refused in every tier; without a network namespace of
        // its own, the process tier is kept off the network by the filter.
        socketFamilies: socketFamilies(tier, network),
        // The host's uid and pid namespace: its processes (the host, the spawner) are not the sandbox's to set.
        selfOnly: tier === 'process' && lease === null,
      })
    : null
  return { seccomp, sessionBound, ownIpc }
}

/** One launcher for both tiers: rlimits, the cgroup and the uid, then bwrap or the tier's own fences. */
function launchPlan(
  tier: Isolation,
  ctx: PlanContext,
  own: TierLaunch,
  rlimits: string[],
  calling: boolean,
): LaunchPlan {
  const { caps, policy, lease, cgroup, pathFds, seccomp } = ctx
  // Only what the sandbox gets stays open until it starts.
  pathFds.closeUnpassed()
  const fds = pipedFds(tier, seccomp !== null, calling, ctx.proxied, ctx.warm)
  const argv = launcherArgv({
    launcher: caps.launcher!,
    keepFds: [...fds, ...pathFds.passed.map((p) => p.child)],
    // A warm member's are its run's, set by cordon-await (see warm.ts): none of its own before.
    rlimits: ctx.warm ? [] : rlimits,
    join: cgroup ? joinFiles(cgroup.support.version, cgroup.dirs) : [],
    scratch: own.scratch,
    drop: lease && { uid: lease.uid, gid: lease.gid },
    mergeStderr: policy.mergeOutput,
    program: own.program,
    ...own.launcher,
  })
  return {
    tier,
    file: argv[0]!,
    args: argv.slice(1),
    env: ctx.env,
    // Never the cwd by name: bwrap enters it inside the sandbox, the process tier's launcher by its fd.
    cwd: '/',
    lease,
    cgroup,
    scratch: own.scratch,
    perProcessLimits: cgroup ? [] : ['cpuTimeMs', 'memoryBytes', 'maxProcesses'],
    seccomp,
    fds,
    pathFds,
    mergeOutput: policy.mergeOutput,
    warm: null,
  }
}
