// The supervisor: spawn the launcher, wire its pipes, watch its end. What stops the sandbox is the
// stopper's (stopper.ts), what the end means is outcome()'s (outcome.ts), the result is made by result.ts.
import { spawn } from 'node:child_process'
import type { Readable } from 'node:stream'
import type { SandboxCgroup } from '../host/cgroup.js'
import { livingByUid, signalFound } from '../host/procs.js'
import { monotonicMs } from '../lazy.js'
import type { NetworkProxy } from '../net/proxy.js'
import { type LaunchPlan, releasePlan } from '../plan/plan.js'
import type { RunResult } from '../policy/result.js'
import type { OutputChunk, OutputData, Policy } from '../policy/schema.js'
import { spawnerForRun } from '../spawner/default.js'
import { SpawnedProcess, SpawnerError } from '../spawner/spawner.js'
import { type Child, extraFds, feedStdin, spawnerStdio, stdioFor } from './fds.js'
import type { RunHandle } from './handle.js'
import {
  cgroupProcesses,
  type Leader,
  namespaceProcesses,
  processTierProcesses,
  reap,
  type SandboxProcesses,
  watchStatus,
} from './kill.js'
import { LogCollector } from './logs.js'
import { outcome } from './outcome.js'
import { OutputBuffer } from './output.js'
import { ChunkQueue } from './queue.js'
import type { Redaction } from './redact.js'
import { watchRefusal } from './refusal.js'
import { finishedResult } from './result.js'
import { coveredPaths, SetupHold } from './setup-retry.js'
import { Stopper } from './stopper.js'
import type { WarmMember } from './warm.js'

/** How long the end waits for what is left of the sandbox (bwrap's init tearing down its namespace). */
const REAP_MS = 5000

/** What callFunction adds to a run: paths to show, a request to hand over, a reply to collect. */
export interface CallChannel {
  visible: readonly string[]
  request: Buffer
  onReply(data: Buffer): void
}

/** What supervise() is given: a prepared plan, its cgroup (made), the run's proxies and redaction. */
export interface Supervised {
  plan: LaunchPlan
  policy: Policy
  cgroup: SandboxCgroup | null
  /** start(): a live output iterator, and stdin left open when none was given. */
  interactive: boolean
  call: CallChannel | undefined
  proxy: NetworkProxy | null
  redaction: Redaction
  /** A warm member taken for this run (see warm.ts): its sandbox, already made, runs the program. */
  warm?: { member: WarmMember; record: Buffer }
  /**
   * Launch this run again, prepared afresh: offered when bwrap may fail for a covered path gone since it
   * was listed (see setup-retry.ts). Absent: no more attempts.
   */
  relaunch?: () => RunHandle<OutputData>
}

export function supervise(run: Supervised): RunHandle<OutputData> {
  const { plan, policy, cgroup, interactive, call, proxy, redaction } = run
  const keepStdinOpen = interactive && policy.stdin === undefined
  const { limits } = policy
  const { lease } = plan
  // A uid inherited from a host that died mid-run may still have processes: clean slate first (a warm
  // member's was cleaned when it was made: what runs as it now is the member).
  if (lease?.inherited && !run.warm)
    signalFound(livingByUid(lease.uid), 'SIGKILL', (now) => now.uid === lease.uid)

  const stopper = new Stopper(limits, policy.signal)
  const callbacks = callbackGuard(() => stopper.stop('canceled', false))
  const onOutput = callbacks.guard(policy.onOutput)
  // Only start() hands out the live iterator; run() does not keep a second copy of every chunk.
  const queue = interactive ? new ChunkQueue<OutputChunk<OutputData>>() : null
  const out = new OutputBuffer<OutputData>(
    limits.maxOutputBytes,
    (chunk) => {
      queue?.push(chunk)
      onOutput?.(chunk)
    },
    redaction,
    { live: queue !== null || onOutput !== undefined, encoding: policy.encoding, merged: plan.mergeOutput },
  )
  const logs = new LogCollector(limits.maxLogBytes, redaction, callbacks.guard(policy.onLog))
  const started = monotonicMs()
  const stdinPiped = keepStdinOpen || policy.stdin !== undefined
  const child = run.warm ? run.warm.member.child : startChild(plan, policy, stdinPiped)
  const fds = extraFds(child)
  // A warm member's bwrap read its filter when it was made.
  if (plan.seccomp && !run.warm) fds.seccomp?.end(plan.seccomp)
  if (proxy) fds.token?.end(proxy.token)
  fds.log?.on('data', (b: Buffer) => logs.push(b))
  const refused = watchRefusal(fds.refusal)
  if (call) {
    fds.request?.end(call.request)
    fds.reply?.on('data', (b: Buffer) => call.onReply(b))
  }
  const { procs, programRan } = sandboxProcesses(child, plan, cgroup, fds.status)
  cgroup?.keepOpen()
  stopper.arm(procs, cgroup && (() => cgroup.cpuMs()))

  const push = (stream: 'stdout' | 'stderr', b: Buffer) =>
    out.push(stream, b) || stopper.stop('output-limit', false)
  const setup = run.relaunch
    ? new SetupHold(coveredPaths(plan), plan.mergeOutput ? 'stdout' : 'stderr', (b) => push(setup!.stream, b))
    : null
  child.stdout?.on('data', (b: Buffer) => setup?.take('stdout', b) || push('stdout', b))
  child.stderr?.on('data', (b: Buffer) => setup?.take('stderr', b) || push('stderr', b))
  if (child.stdout && child.stderr) takeTurns([child.stdout, child.stderr])
  const releaseStdin = feedStdin(child, policy.stdin, keepStdinOpen)
  // Everything is listening: the member may run the program now.
  run.warm?.member.activate(run.warm.record)

  // The next attempt, once this one is launched again (see setup-retry.ts): the handle is then its.
  let next: RunHandle<OutputData> | null = null
  let killed = false
  const result = new Promise<RunResult<OutputData>>((resolve, reject) => {
    let launchError: string | null = null
    let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null
    let wallMs = 0
    child.on('error', (error) => {
      launchError ??= `could not launch ${plan.file}: ${error.message}`
    })
    child.on('exit', (code, sig) => {
      exited = { code, signal: sig }
      wallMs = monotonicMs() - started
      // In the namespace tier a clean exit of bwrap's monitor means its init is gone; a killed one may not be.
      stopper.launcherGone(plan.tier === 'process' || sig !== null, () => {
        for (const pipe of child.stdio) pipe?.destroy()
      })
    })
    child.on('close', async (code, sig) => {
      await stopper.close()
      // Even a clean exit can leave bwrap's init tearing down its namespace for a moment: wait it out.
      // The uid is still this run's here (releasePlan gives it back below), so a scan by it is sound.
      if (procs) await reap(procs, REAP_MS)
      releaseStdin()
      const usage = cgroup?.usage() ?? null
      await Promise.all([cgroup?.remove(), proxy?.close(), releasePlan(plan)])
      // bwrap's refusal to cover a path gone since it was listed: launched again, as if it never ran.
      const setupFailed =
        (exited ?? { code }).code === 1 && !programRan() && refused() === '' && launchError === null
      if (setupFailed && !killed && !callbacks.thrown && stopper.reason === null && setup?.retryable()) {
        next = run.relaunch!()
        setup!.replayInto(next.write, next.closeStdin)
        if (queue) void forward(next.output, queue)
        return resolve(next.result)
      }
      setup?.let()
      const ending = outcome({
        tier: plan.tier,
        exit: exited ?? { code, signal: sig },
        stoppedFor: stopper.reason,
        kernel: usage,
        stderrTail: out.stderrTail,
        limits,
        launchError,
        refusal: refused(),
        programRan: programRan(),
      })
      if (ending.programError !== null) {
        out.push(plan.mergeOutput ? 'stdout' : 'stderr', Buffer.from(ending.programError))
      }
      const output = out.finish()
      queue?.end()
      if (callbacks.thrown) return reject(callbacks.thrown.error)
      const end = {
        ending,
        output,
        kept: out,
        logs: { entries: logs.finish(), truncated: logs.truncated },
        network: proxy,
        usage,
        wallMs: wallMs || monotonicMs() - started,
        isolation: plan.tier,
        perProcessLimits: plan.perProcessLimits,
      }
      resolve(finishedResult(end, redaction))
    })
  })

  return {
    get pid() {
      return next ? next.pid : child.pid
    },
    output: queue ?? { async *[Symbol.asyncIterator]() {} },
    write: (data) => {
      if (next) return next.write(data)
      if (!(keepStdinOpen && child.stdin?.writable)) return false
      setup?.wrote(data)
      return child.stdin.write(data)
    },
    closeStdin: () => {
      if (next) return next.closeStdin()
      setup?.closedStdin()
      child.stdin?.end()
    },
    // After the run has closed: nothing at all (see Stopper.close).
    kill: () => {
      killed = true
      if (next) next.kill()
      else stopper.stop('canceled', true)
    },
    result,
  }
}

/** The next attempt's live chunks, into this run's iterator. */
async function forward(
  from: AsyncIterable<OutputChunk<OutputData>>,
  to: ChunkQueue<OutputChunk<OutputData>>,
) {
  for await (const chunk of from) to.push(chunk)
  to.end()
}

/**
 * The caller's own callbacks run inside pipe handlers, where a throw would take the host down: the first
 * one stops the sandbox (`onThrow`) and becomes the rejection of the result, after the usual clean-up.
 */
function callbackGuard(onThrow: () => void) {
  const state = {
    thrown: null as { error: unknown } | null,
    guard: <T>(callback: ((value: T) => void) | undefined) =>
      callback &&
      ((value: T) => {
        if (state.thrown) return
        try {
          callback(value)
        } catch (error) {
          state.thrown = { error }
          onThrow()
        }
      }),
  }
  return state
}

/**
 * Spawn the plan's launcher: through the policy's spawner, or the default one when it is open (unless the
 * policy says `spawner: false`), else by forking this process (detached: its own session and process
 * group, away from the host's terminal). What cannot start at all (exec refuses the environment's size, the
 * policy's spawner is gone) is a process that failed: 'error', then 'close', so the run ends through the one
 * path that gives everything back. The default spawner found gone at the request is not the run's failure:
 * nothing was started, and the host forks instead.
 */
function startChild(plan: LaunchPlan, policy: Policy, stdin: boolean): Child {
  const stdio = stdioFor(plan, stdin)
  const { file, args, cwd, env } = plan
  const fork = () => spawn(file, args, { cwd, env, stdio, detached: true })
  try {
    if (policy.spawner) {
      return policy.spawner.spawn({ file, args, cwd, env, detached: true, stdio: spawnerStdio(stdio) })
    }
    const shared = policy.spawner === false ? null : spawnerForRun()
    if (!shared) return fork()
    try {
      return shared.spawn({ file, args, cwd, env, detached: true, stdio: spawnerStdio(stdio) })
    } catch (error) {
      if (!(error instanceof SpawnerError)) throw error
      return fork()
    }
  } catch (error) {
    return SpawnedProcess.couldNotStart(error as Error)
  } finally {
    // The launcher has its own copies of the judged paths' fds now (or never will).
    plan.pathFds.close()
  }
}

/**
 * Every process of the sandbox, as its tier finds them (null when nothing could be started), and whether
 * bwrap reported the program's exit: it ran the program (a refusal of bwrap's is no longer possible).
 */
function sandboxProcesses(
  child: Child,
  plan: LaunchPlan,
  cgroup: SandboxCgroup | null,
  status: Readable | undefined,
): { procs: SandboxProcesses | null; programRan: () => boolean } {
  if (child.pid === undefined) return { procs: null, programRan: () => false }
  const leader: Leader = {
    pid: child.pid,
    gone: () => child.exitCode !== null || child.signalCode !== null,
    signal: (sig) => child.kill(sig),
  }
  let procs: SandboxProcesses
  let programRan = () => false
  if (plan.tier === 'namespace') {
    const ns = namespaceProcesses(leader, plan.lease)
    programRan = watchStatus(status, (init) => ns.setInit(init)).programRan
    procs = ns
  } else {
    procs = processTierProcesses(leader, plan.lease)
  }
  if (cgroup) procs = cgroupProcesses(cgroup, procs, plan.tier === 'namespace', leader)
  return { procs, programRan }
}

/**
 * Read the output pipes in turns: after each read a pipe waits for the next turn of the event loop. libuv
 * reads one ready pipe up to 32 times (64 KiB each) before it looks at the next, so two streams flooding at
 * once would otherwise reach the output budget in reads of one of them only; in turns, each ready pipe gets
 * one read a turn. (Paused, a socket may read once more into its buffer; that read waits for the turn too.)
 */
function takeTurns(pipes: readonly Readable[]): void {
  for (const pipe of pipes) {
    const resume = () => pipe.resume()
    pipe.on('data', () => {
      pipe.pause()
      setImmediate(resume)
    })
  }
}
