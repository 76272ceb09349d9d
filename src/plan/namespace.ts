// The namespace tier's launch: cordon's launcher (rlimits, cgroup, uid) starts bwrap, which builds the
// sandbox's namespaces and mounts, installs the seccomp filter from SECCOMP_FD and runs the program,
// through the exec step, the clock's `env` and the network bridge when they are needed.
import path from 'node:path'
import { ownCgroupView } from '../host/cgroups.js'
import { AWAITER_PATH } from '../host/native.js'
import { isSocket, recentHostSockets } from '../host/sockets.js'
import { HTTP_PROXY_PORT, SOCKS_PROXY_PORT } from '../net/proxy.js'
import { defaultHide } from '../policy/schema.js'
import { bridgeArgv } from './bridge.js'
import { appliedHides, bwrapArgs, EXEC_INSIDE, pinnedDirs } from './bwrap.js'
import { identityFor, type PlanContext, type TierLaunch } from './context.js'
import { IDENTITY_FDS, SECCOMP_FD, STATUS_FD } from './fd-layout.js'
import type { IdentityPath } from './identity.js'
import { execStep } from './launcher.js'
import {
  canSearch,
  type Hidden,
  hiddenPaths,
  refusePlantedIntoHidden,
  resolvePath,
  searchableBy,
  secretsOf,
  writableVia,
} from './paths.js'
import { ROOT_TMPDIR } from './process-mounts.js'

/** Where the namespace tier's launcher attaches judged paths bwrap could not reach (see stage_fds). */
export const STAGE_DIR = ROOT_TMPDIR

const PROXY_ENV = {
  HTTP_PROXY: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  HTTPS_PROXY: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  http_proxy: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  https_proxy: `http://127.0.0.1:${HTTP_PROXY_PORT}`,
  ALL_PROXY: `socks5h://127.0.0.1:${SOCKS_PROXY_PORT}`,
  all_proxy: `socks5h://127.0.0.1:${SOCKS_PROXY_PORT}`,
}

export function namespaceLaunch(ctx: PlanContext): TierLaunch {
  const { policy, env, lease, pathFds } = ctx
  const { cwd, writable, readable, rootfs } = ctx.named
  // A warm member runs cordon-await, bound where the exec step would be: the program comes with its run.
  const stepFile = ctx.warm ? awaiterFile(ctx) : execStepFile(ctx)
  const program = ctx.warm ? [EXEC_INSIDE] : programArgv(ctx, stepFile)
  if (ctx.proxied) Object.assign(env, PROXY_ENV)
  // The judged paths the launcher stages (see stageFds below), decided once: the cover of STAGE_DIR
  // in the sandbox and the staging itself must not rest on two lookups a chmod could fall between.
  // Staged: a path beneath a directory the sandbox uid cannot search, out of bwrap's reach by its name.
  const blockedAbove = (p: string) => lease !== null && !searchableBy(path.dirname(p), lease.uid, lease.gid)
  // The hides, and the directories above them pinned in place (see pinnedDirs): judged and bound by fd.
  const network = policy.network === 'host' ? 'host' : 'none'
  const hide = hidden(ctx)
  const applied = appliedHides(hide, { writable, ...(readable ? { readable } : {}), cwd, network })
  const pinned = pinnedDirs(applied, writable, [...writable, ...(readable ?? [])])
  for (const dir of pinned) pathFds.open('hide', dir, { dir: true })
  const staged = new Set(
    [
      cwd,
      ...pinned,
      ...writable,
      ...(readable ?? []),
      ...ctx.shown,
      ...rootfsDirs(rootfs),
      stepFile ?? '/',
      ctx.bridge ?? '/',
    ].filter(blockedAbove),
  )
  const searchable = lease ? (dir: string) => canSearch(dir, lease.uid, lease.gid) : undefined
  /** Which of cordon's own /etc files bwrap shows (the rest are the tree's, listed or hidden). */
  const identityShown: IdentityPath[] = []
  const bwrap = [
    ctx.caps.bwrap!,
    ...bwrapArgs({
      writable,
      cwd,
      visible: ctx.shown,
      network,
      ...(ctx.netDir && ctx.bridge ? { netDir: ctx.netDir, bridge: ctx.bridge } : {}),
      tmpfsBytes: policy.limits.tmpfsBytes,
      hide,
      ...(rootfs ? { rootfs } : {}),
      ...(readable ? { readable } : {}),
      ...(ctx.seccomp ? { seccompFd: SECCOMP_FD } : {}),
      statusFd: STATUS_FD,
      fdFor: (p) => pathFds.pass(p),
      ...(stepFile ? { execStep: stepFile } : {}),
      ...(network === 'none' ? { sockets: recentHostSockets(), socketLive: isSocket } : {}),
      cgroups: ownCgroupView(ctx.cgroup),
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
  const identity = identityFor(lease, env)
  return {
    program: bwrap,
    scratch: null,
    launcher: {
      // bwrap makes the namespaces, mounts and filter: the launcher adds none of the process tier's fences.
      unshareNet: false,
      unshareIpc: false,
      mounts: null,
      writable: null,
      scope: { signals: false, abstractUnix: false },
      // bwrap installs the filter itself, from SECCOMP_FD, after its own set-up.
      seccomp: null,
      memfds: identityShown.map((p) => ({ fd: IDENTITY_FDS[p], content: identity[p] })),
      // bwrap reaches a judged path by the path its fd names, as the sandbox uid: one beneath a directory
      // that uid cannot search is staged by the launcher.
      stageFds: pathFds.passed.filter((p) => staged.has(p.path)).map((p) => p.child),
      bwrapEnv: true,
      // bwrap is the monitor, and the sandbox has its own pid namespace: no session to kill.
      monitor: false,
      killSession: false,
    },
  }
}

/**
 * The launcher as the exec step, only when the judged real path differs from the name it was found by (a
 * symlink): what runs is the judged real path, never the name as found (which a sandbox may swap
 * meanwhile), and argv[0] stays the name, which bwrap, env and the bridge cannot set. Bound by fd at its
 * fixed place in the sandbox's own /dev: the sandbox uid needs no search permission on cordon's directories.
 */
function execStepFile(ctx: PlanContext): string | null {
  if (ctx.check.real === ctx.check.program) return null
  const stepFile = resolvePath('command', ctx.caps.launcher!)
  ctx.pathFds.open('command', stepFile)
  return stepFile
}

/** A warm member's cordon-await, judged and bound by fd like the exec step. */
function awaiterFile(ctx: PlanContext): string {
  const file = resolvePath('command', AWAITER_PATH)
  ctx.pathFds.open('command', file)
  return file
}

/** What bwrap runs: [exec step] [env CLOCK…] [bridge] program args. */
function programArgv(ctx: PlanContext, stepFile: string | null): string[] {
  const { check, clock } = ctx
  const target = stepFile ? execStep(EXEC_INSIDE, check.program, check.real) : [check.real]
  // The clock's variables reach only the program, through `env`, the last exec before it: the launcher
  // and bwrap start as root and must not load libfaketime, whose state they would leave unreadable.
  const withClock = clock
    ? [ctx.caps.env!, ...Object.entries(clock).map(([k, v]) => `${k}=${v}`), ...target]
    : target
  // With an allowlist, cordon's bridge (bound in, so on any root filesystem) starts first, then execs it.
  return ctx.proxied
    ? bridgeArgv([...withClock, ...ctx.command.slice(1)])
    : [...withClock, ...ctx.command.slice(1)]
}

/** The paths bwrap hides (only bwrap hides paths: resolved only for it). */
function hidden(ctx: PlanContext): Hidden[] {
  const { cwd, writable, readable } = ctx.named
  const { lease } = ctx
  const hide = hiddenPaths((ctx.policy.hide ?? defaultHide()).map((p) => path.resolve(cwd, p)))
  // A hidden directory shown all the same (cordon started from the home) keeps its dot-entries hidden.
  // Directories above it the sandbox uid cannot search are covered (see blockedDirs): only its own mode counts.
  const reachable = (dir: string) => !lease || canSearch(dir, lease.uid, lease.gid)
  const listed = [cwd, ...writable, ...(readable ?? [])]
  // A symlinked dot-entry of a home the sandbox can write is refused (a run could swap it; see secretsOf).
  const readOnly = [...(readable ?? []), ...hide.map((h) => h.path).filter((h) => !listed.includes(h))]
  hide.push(...secretsOf(hide, listed, reachable, (dir) => writableVia(dir, writable, readOnly)))
  // A named path shows through what is hidden: not one a link of the sandbox's own leads into.
  refusePlantedIntoHidden(ctx.named.resolved, hide, [cwd, ...writable, ...(readable ?? []), ...ctx.shown])
  return hide
}

/** The tree's top-level directories, bound by fd (judged in judgePaths). */
function rootfsDirs(rootfs: PlanContext['named']['rootfs']): string[] {
  return rootfs
    ? rootfs.entries.filter((e) => e.symlink === null).map((e) => path.join(rootfs.dir, e.name))
    : []
}
