// A warm member: a namespace-tier sandbox made ahead of its run, inside its namespaces, mounts, uid,
// cgroup and seccomp filter, with cordon-await (native/await.c) waiting on a pipe for one activation
// record in place of the program. What it is, and what is pre-made versus per run: src/plan/warm.ts.
//
// - Single use: a member runs one program and is destroyed after it as a cold run's sandbox is (its
//   cgroup, uid and tmpfs go); one that was given a record is never handed out again.
// - Nothing of a run is in it before its activation: it is made from the sandbox's policy alone, with an
//   empty environment, and the record (the program, argv, environment, rlimits) comes on a pipe only the
//   host and cordon-await hold, which cordon-await closes before the program runs.
// - The program is executed fresh at activation, never forked from a prepared image.
// - Limits hold from the program's first instruction: the run's cgroup limits are written before the
//   record, cordon-await lowers the rlimits before its execve, and the run's CPU time and peak memory are
//   counted from the activation (the member's own set-up is not the run's).
// - It is given to a run only when the run's plan, built as this member's (its uid and cgroup), has its
//   key, every judged path it binds is the very file the member bound, and every path bwrap looked up by
//   name still names the file it did (see plan/warm.ts); anything else is a cold run.
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { fstatSync, lstatSync } from 'node:fs'
import type { Socket } from 'node:net'
import type { Readable, Writable } from 'node:stream'
import type { Capabilities } from '../host/capabilities.js'
import { SandboxCgroup } from '../host/cgroup.js'
import { livingByUid, signalFound } from '../host/procs.js'
import { REFUSAL_FD, SECCOMP_FD, WARM_FDS } from '../plan/fd-layout.js'
import { type LaunchPlan, prepare, releasePlan } from '../plan/plan.js'
import { type Activation, activationRecord, namedPaths, type WarmSeed } from '../plan/warm.js'
import type { Policy } from '../policy/schema.js'
import type { SpawnedProcess, Spawner } from '../spawner/spawner.js'
import { type Child, spawnerStdio, stdioFor } from './fds.js'
import { cgroupProcesses, namespaceProcesses, reap, type SandboxProcesses } from './kill.js'

/** How long a member may take to be ready before it is given up. */
const READY_MS = 10_000
/** How long destroying one waits for what is left of it. */
const REAP_MS = 5000
/** The largest activation record given to a member (native/await.c reads up to 8 MiB). */
const MAX_RECORD_BYTES = 1024 * 1024

/** Where a run may find a warm member (a Sandbox's pool). */
export interface WarmSource {
  /** A ready member, out of the pool (the caller gives it back or uses it), or null. */
  take(): WarmMember | null
  /** Not used: back to the pool (it fits other runs), or destroyed ('stale': it fits none any more). */
  giveBack(member: WarmMember, why: 'other' | 'stale'): void
  /** Used by a run, which ends when `ended` settles. */
  used(member: WarmMember, ended: Promise<unknown>): void
}

/** What the pool needs to know of each member: it became ready, or it is gone (before being taken). */
export interface MemberEvents {
  ready(member: WarmMember): void
  /** It ended or failed before a run took it; `why` says what it or bwrap said, when anything. */
  lost(member: WarmMember, why: string): void
}

/** Whose hands a member is in: made and not yet ready, ready in the pool, a run's, or gone. */
type State = 'creating' | 'ready' | 'taken' | 'gone'

/** `path`'s file (device, inode, type) without following a last symlink; '-' when there is none. */
function identity(path: string): string {
  const st = lstatSync(path, { throwIfNoEntry: false })
  return st ? `${st.dev}:${st.ino}:${st.mode & 0o170000}` : '-'
}

export class WarmMember {
  state: State = 'creating'
  /** When it became ready (monotonic ms of Date.now()): members older than the pool's idle time go. */
  readyAt = 0
  private readonly named: string[]
  private readonly namedIds: string[]
  /** The judged paths it binds by fd, as the files they are. */
  private readonly fdIds: string[]
  private readonly timer: NodeJS.Timeout
  private destroyed: Promise<void> | null = null

  private constructor(
    readonly plan: LaunchPlan,
    readonly child: Child,
    readonly cgroup: SandboxCgroup | null,
    private readonly spawner: Spawner | null,
    fdIds: string[],
    namedIds: string[],
    events: MemberEvents,
  ) {
    this.named = namedPaths(plan.args)
    this.namedIds = namedIds
    this.fdIds = fdIds
    const said: Buffer[] = []
    // What the launcher refused, or bwrap said, before it was ready: why it never was.
    for (const pipe of [child.stdio[REFUSAL_FD], child.stderr] as (Readable | null)[])
      pipe?.on('data', (b: Buffer) => this.state === 'creating' && said.push(b))
    const ready = child.stdio[WARM_FDS.ready] as Readable | null
    ready?.once('data', () => {
      clearTimeout(this.timer)
      // One byte is all it ever says: nothing more is read from it.
      ready.destroy()
      if (this.state !== 'creating') return
      // Its mounts were made on what the names were then: still the same now, or it is of no use.
      if (this.named.some((p, i) => identity(p) !== this.namedIds[i])) {
        this.state = 'gone'
        events.lost(this, 'a path it mounts by name changed while it was made')
        void this.destroy()
        return
      }
      this.state = 'ready'
      this.readyAt = Date.now()
      events.ready(this)
    })
    const gone = () => {
      clearTimeout(this.timer)
      if (this.state !== 'creating' && this.state !== 'ready') return
      this.state = 'gone'
      events.lost(this, Buffer.concat(said).toString().trim() || 'it ended before its run')
      void this.destroy()
    }
    child.once('exit', gone)
    child.once('error', gone)
    this.timer = setTimeout(() => {
      if (this.state !== 'creating') return
      this.state = 'gone'
      events.lost(this, `not ready within ${READY_MS} ms`)
      void this.destroy()
    }, READY_MS)
    this.timer.unref()
    this.hold(false)
  }

  /**
   * Make a member of `policy`'s shape: null when the policy can have none (the process tier, a network
   * allowlist) or the machine refuses it (the reason in `events.lost` is then not called: nothing was made).
   * Throws what prepare() throws (invalid paths), with nothing left held.
   */
  static create(
    policy: Policy,
    caps: Capabilities,
    spawner: Spawner | null,
    events: MemberEvents,
  ): WarmMember | { cold: string } {
    const prepared = prepare(null, policy, caps, undefined, undefined, { seed: null })
    if (prepared.kind === 'cold') return { cold: prepared.reason }
    if (prepared.kind === 'refused') return { cold: prepared.violation.message }
    const { plan } = prepared
    let cgroup: SandboxCgroup | null = null
    try {
      // No limits yet: they are the run's, written at its activation. Until then only cordon runs here.
      cgroup = plan.cgroup && SandboxCgroup.create(plan.cgroup.support, [], plan.cgroup.dirs)
    } catch (error) {
      void releasePlan(plan)
      return { cold: `could not create a cgroup: ${(error as Error).message}` }
    }
    const { lease } = plan
    // A uid taken over from a dead owner may still have its processes: clean slate first.
    if (lease?.inherited) signalFound(livingByUid(lease.uid), 'SIGKILL', (now) => now.uid === lease.uid)
    const named = namedPaths(plan.args)
    const namedIds = named.map(identity)
    const fdIds = plan.pathFds.passed.map((p) => {
      const st = fstatSync(p.host)
      return `${p.child}:${st.dev}:${st.ino}`
    })
    let child: Child
    try {
      child = startMember(plan, spawner)
    } catch (error) {
      // Not started (the host is out of processes or fds): nothing of it to wait for.
      void cgroup?.remove()
      void releasePlan(plan)
      return { cold: `could not start one: ${(error as Error).message}` }
    }
    const member = new WarmMember(plan, child, cgroup, spawner, fdIds, namedIds, events)
    const seccomp = child.stdio[SECCOMP_FD] as Writable | null
    seccomp?.on('error', () => {})
    if (plan.seccomp) seccomp?.end(plan.seccomp)
    return member
  }

  /** This member's uid and cgroup, which a run's plan is built with to be compared with it (see fits). */
  get seed(): WarmSeed {
    return { lease: this.plan.lease!, cgroupName: this.plan.warm!.cgroupName }
  }

  /**
   * Whether a run's plan (built with this member's `seed`) may be given this member: the same key, the
   * same files behind its judged paths, and every name bwrap looked up still the file it was. 'stale' when
   * only the host changed under it (so no run of its shape would fit any more).
   */
  fits(plan: LaunchPlan): true | 'other' | 'stale' {
    if (plan.warm?.key !== this.plan.warm?.key) return 'other'
    const fdIds = plan.pathFds.passed.map((p) => {
      const st = fstatSync(p.host)
      return `${p.child}:${st.dev}:${st.ino}`
    })
    if (fdIds.join() !== this.fdIds.join()) return 'stale'
    if (this.named.some((p, i) => identity(p) !== this.namedIds[i])) return 'stale'
    return true
  }

  /**
   * The run's record, or null when it is larger than a member takes (MAX_RECORD_BYTES): such a run is cold,
   * where exec refuses what exceeds its own limit as the run's error, as it always has.
   */
  record(activation: Activation, stdin: 'null' | 'pipe'): Buffer | null {
    const record = activationRecord(activation, runUmask(this.plan), stdin)
    return record.length <= MAX_RECORD_BYTES ? record : null
  }

  /**
   * Give this member to a run: write the run's cgroup limits and start its counters (CPU time and peak
   * memory from now), then hold the host open for it. Throws (the member is then of no use) when the
   * limits cannot be written (v1 refuses a memory limit below what is in use).
   */
  take(plan: LaunchPlan): void {
    this.state = 'taken'
    if (this.cgroup && plan.cgroup) {
      this.cgroup.limit(plan.cgroup.writes)
      this.cgroup.startRun()
    }
    this.hold(true)
  }

  /** Hand the run's record over (see `record`): cordon-await executes the program on reading its end. */
  activate(record: Buffer): void {
    const pipe = this.child.stdio[WARM_FDS.activation] as Writable | null
    pipe?.on('error', () => {})
    pipe?.end(record)
  }

  /** End it, with everything of it: its processes, cgroup and uid. Idempotent. */
  destroy(): Promise<void> {
    this.destroyed ??= (async () => {
      if (this.state !== 'taken') this.state = 'gone'
      clearTimeout(this.timer)
      // Held until it is gone: its end is what this waits for.
      this.hold(true)
      const leader = {
        pid: this.child.pid ?? 0,
        gone: () => this.child.exitCode !== null || this.child.signalCode !== null,
        signal: (sig: NodeJS.Signals) => this.child.kill(sig),
      }
      const exited = leader.gone()
        ? Promise.resolve()
        : new Promise<void>((resolve) => this.child.once('exit', () => resolve()))
      if (this.child.pid !== undefined) {
        let procs: SandboxProcesses = namespaceProcesses(leader, this.plan.lease)
        if (this.cgroup) procs = cgroupProcesses(this.cgroup, procs, true, leader)
        procs.kill()
        await exited
        await reap(procs, REAP_MS)
      }
      for (const pipe of this.child.stdio) (pipe as Socket | null)?.destroy()
      await Promise.all([this.cgroup?.remove(), releasePlan(this.plan)])
    })()
    return this.destroyed
  }

  /**
   * While it waits it keeps nothing alive (a host with a warm sandbox and nothing else to do exits, and its
   * members with it); a run's member does, as any run's sandbox.
   */
  private hold(on: boolean): void {
    const child = this.child
    if (on && this.spawner && 'activate' in this.spawner) this.spawner.activate(child as SpawnedProcess)
    if (!this.spawner) on ? (child as ChildProcess).ref() : (child as ChildProcess).unref()
    for (const pipe of child.stdio) {
      const socket = pipe as Socket | null
      if (socket && typeof socket.ref === 'function') on ? socket.ref() : socket.unref()
    }
  }
}

/** The run's umask: the host's of the moment, less the group's write bit on a pool uid (as the launcher). */
function runUmask(plan: LaunchPlan): number {
  const mask = process.umask()
  return plan.lease ? mask & ~0o020 : mask
}

/**
 * Start a member's launcher: through the spawner (standby: it is no run yet), or a fork of the host.
 * Every pipe a run of its shape has, stdin too (cordon-await gives the program /dev/null when its run has
 * none), and none of the host's environment: bwrap, and so cordon-await, start with an empty one.
 */
function startMember(plan: LaunchPlan, spawner: Spawner | null): Child {
  const stdio = stdioFor(plan, true)
  const { file, args, cwd } = plan
  try {
    if (spawner?.usable) {
      return spawner.spawn({ file, args, cwd, env: {}, detached: true, stdio: spawnerStdio(stdio) }, true)
    }
    return spawn(file, args, { cwd, env: {}, stdio, detached: true })
  } finally {
    plan.pathFds.close()
  }
}
