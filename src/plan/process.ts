// The process tier's launch: cordon's launcher alone, no bwrap. It stays as the monitor and its child
// sets the sandbox up (as root a mount namespace of its own; Landlock, seccomp, its own TMPDIR), then
// executes the program.
import { existsSync, realpathSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { PolicyError } from '../errors.js'
import type { Capabilities } from '../host/capabilities.js'
import { SCRATCH_PREFIX, sweepStaleScratch } from '../host/scratch.js'
import { randomHex } from '../lazy.js'
import { covers } from './bwrap.js'
import { identityFor, type PlanContext, type TierLaunch } from './context.js'
import { LANDLOCK_SCOPES } from './launcher.js'
import { canSearch, rootOnlyAbove } from './paths.js'
import { type ProcessMounts, processMounts, ROOT_TMPDIR } from './process-mounts.js'

/** Device files the process tier may write under Landlock (the namespace tier has a private /dev). */
export const DEVICES_WRITABLE = ['/dev/null', '/dev/zero', '/dev/full']

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

export function processLaunch(ctx: PlanContext): TierLaunch {
  const { policy, caps, env, lease, pathFds, check } = ctx
  const { cwd, writable } = ctx.named
  // The launcher is static (no loader to run libfaketime) and the last exec before the program: the
  // clock's variables are simply its environment, without `env`.
  if (ctx.clock) Object.assign(env, ctx.clock)
  // As root, a mount namespace of its own: TMPDIR and /dev/shm are tmpfs bounded by tmpfsBytes, /proc shows
  // its own processes only; nothing of its scratch is ever on the host. Otherwise a TMPDIR named on the
  // host, which the launcher makes a tmpfs of tmpfsBytes in a user namespace of its own (as /dev/shm):
  // a host directory was bounded per file only, and a run wrote 3 x its tmpfsBytes to the host's disk.
  // A machine without user namespaces is refused before this (unmetNeed, limits.tmpfsBytes).
  const mounts = caps.isRoot ? rootMounts(ctx) : null
  const scratch = caps.isRoot ? null : newScratch(caps.launcher!)
  const shm = scratch && existsSync('/dev/shm') ? ['/dev/shm'] : []
  for (const name of ['TMPDIR', 'HOME']) {
    if (!Object.hasOwn(policy.env, name) && !policy.passEnv.includes(name)) env[name] = scratch ?? ROOT_TMPDIR
  }
  // Its own user, with the HOME it now has. Not as root there is no mount namespace: the host's files stay.
  const identity = identityFor(lease, env)
  const landlockFs = caps.landlock >= 1
  // The fds are passed in this order (writable, keeps, cwd): their sandbox numbers follow from it.
  // Landlock's rules for the judged writable paths are made from their fds, not by opening the names again.
  const writableFds = landlockFs ? writable.map((p) => pathFds.pass(p)) : []
  // The paths shown again beneath its covers, from the fds they were judged on.
  const keeps = mounts ? mounts.keeps.map((p) => ({ fd: pathFds.pass(p), path: p })) : []
  // The program inherits the launcher's cwd: entered from the fd it was judged on.
  const cwdFd = pathFds.pass(cwd)
  const noNetwork = policy.network === 'none'
  const scoped = caps.landlock >= LANDLOCK_SCOPES
  return {
    program: [check.real, ...ctx.command.slice(1)],
    scratch,
    launcher: {
      ownTmpfs: scratch ? policy.limits.tmpfsBytes : null,
      unshareNet: noNetwork && processTierNetns(caps, ctx.seccomp !== null),
      // Shared memory would otherwise outlive the run on the host, holding memory and data for the next.
      unshareIpc: ctx.ownIpc,
      mounts: mounts && {
        ...mounts,
        keeps,
        tmpfsBytes: policy.limits.tmpfsBytes,
        files: mounts.identity.map((p) => ({ path: p, content: identity[p] })),
      },
      // Not as root its /dev/shm is its own tmpfs too, as root's is: writable like its TMPDIR.
      writable: landlockFs ? [...(mounts ? mounts.writable : [scratch!, ...shm]), ...DEVICES_WRITABLE] : null,
      writableFds,
      scope: { signals: scoped, abstractUnix: scoped && noNetwork },
      seccomp: ctx.seccomp,
      bwrapEnv: false,
      // The launcher stays as the program's parent: no bwrap to be the monitor.
      monitor: true,
      // The session marks the sandbox's processes only while its leader, the monitor, lives.
      killSession: ctx.sessionBound,
      cwdFd,
      // What runs is the judged real path; the launcher sets argv[0] to the name as found.
      ...(check.real !== check.program ? { argv0: check.program } : {}),
    },
  }
}

/**
 * The mounts of root's process tier: the launcher mounts on a directory only when no one but root can
 * swap a name above it, and mounts every cover before the paths it shows again: not one inside such a path.
 */
function rootMounts(ctx: PlanContext): ProcessMounts {
  const { cwd, writable } = ctx.named
  const { lease, shown, policy } = ctx
  const mounts = processMounts({
    network: policy.network === 'none' ? 'none' : 'host',
    shown: [cwd, ...shown],
    writable,
    shm: existingPathOr('/dev/shm'),
    ...(lease ? { searchable: (dir: string) => canSearch(dir, lease.uid, lease.gid) } : {}),
  })
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
  return mounts
}

/** A fresh private TMPDIR's name, made by the launcher: named after this process, so the next cordon
 * removes it if this one dies mid-run (as this one removes what dead ones left). */
function newScratch(launcher: string): string {
  const tmp = os.tmpdir()
  sweepStaleScratch(launcher, tmp)
  return path.join(tmp, `${SCRATCH_PREFIX}${process.pid}-${randomHex(16)}`)
}

/** `p` resolved, or `p` itself when it does not exist. */
function existingPathOr(p: string): string {
  try {
    return realpathSync(p)
  } catch {
    return p
  }
}
