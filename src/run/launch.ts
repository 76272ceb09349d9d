// The supervisor: spawn → stream → enforce → classify. Everything with processes and timers is here.
import { spawn } from 'node:child_process'
import type { Readable } from 'node:stream'
import { recentCapabilities } from '../host/capabilities.js'
import { SandboxCgroup } from '../host/cgroup.js'
import { livingByUid, signalFound } from '../host/procs.js'
import { monotonicMs } from '../lazy.js'
import { NetworkProxy } from '../net/proxy.js'
import { type LaunchPlan, prepare, releasePlan } from '../plan/plan.js'
import type { Isolation, RunResult, Violation } from '../policy/result.js'
import {
  type AnyRunOptions,
  type OutputChunk,
  type OutputData,
  type Policy,
  parseCommand,
  parsePolicy,
  type RunOptions,
} from '../policy/schema.js'
import { SpawnedProcess } from '../spawner/spawner.js'
import { type Child, extraFds, feedStdin, spawnerStdio, stdioFor } from './fds.js'
import { finishedHandle, type RunHandle } from './handle.js'
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
import { type Redaction, redactionFor, redactionForInput, redactThrown } from './redact.js'
import { watchRefusal } from './refusal.js'
import { finishedResult, unstartedResult } from './result.js'
import { Stopper } from './stopper.js'

export type { RunHandle } from './handle.js'

/**
 * Start a sandboxed command; throws PolicyError for invalid options. Without `stdin` the sandbox's stdin
 * stays open for `write()` until `closeStdin()`. With `encoding: 'buffer'` output comes as Buffers.
 */
export function start(command: readonly string[], options: RunOptions<Buffer>): RunHandle<Buffer>
// Last, so that Parameters<typeof start> is the usual text form.
export function start(command: readonly string[], options?: RunOptions): RunHandle
export function start(command: readonly string[], options: AnyRunOptions = {}): RunHandle<OutputData> {
  return launch(command, options, true)
}

/**
 * Run a sandboxed command to completion. Without `stdin` the sandbox reads EOF at once. With
 * `encoding: 'buffer'` output comes as Buffers.
 */
export function run(command: readonly string[], options: RunOptions<Buffer>): Promise<RunResult<Buffer>>
// Last, so that Parameters<typeof run> is the usual text form.
export function run(command: readonly string[], options?: RunOptions): Promise<RunResult>
export async function run(
  command: readonly string[],
  options: AnyRunOptions = {},
): Promise<RunResult<OutputData>> {
  return launch(command, options, false).result
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

/** What callFunction adds to a run: paths to show, a request to hand over, a reply to collect. */
export interface CallChannel {
  visible: readonly string[]
  request: Buffer
  onReply(data: Buffer): void
}

/** `interactive`: start() — a live output iterator, and stdin left open when none was given. */
export function launch(
  command: readonly string[],
  options: AnyRunOptions,
  interactive: boolean,
  call?: CallChannel,
): RunHandle<OutputData> {
  let argv: string[]
  let policy: Policy
  try {
    argv = parseCommand(command)
    policy = parsePolicy(options)
  } catch (error) {
    // An option error quotes the value at fault, which may be a secret.
    throw redactThrown(error, redactionForInput(options))
  }
  policy.spawner?.assertOpen()
  const redaction = redactionFor(policy)
  // An allowlist gets this run's own proxies; they live exactly as long as the run.
  const proxy = typeof policy.network === 'object' ? new NetworkProxy(policy.network) : null
  const finish = (isolation: Isolation, violation: Violation) => {
    void proxy?.close()
    return finishedHandle(unstartedResult(isolation, violation, policy.encoding, redaction))
  }
  let prepared: ReturnType<typeof prepare>
  try {
    prepared = prepare(argv, policy, recentCapabilities(policy.cgroup.parent), call?.visible, proxy?.dir)
  } catch (error) {
    void proxy?.close()
    throw redactThrown(error, redaction)
  }
  if (prepared.kind === 'refused') return finish(prepared.tier, prepared.violation)
  const { plan } = prepared
  if (plan.lease) proxy?.handTo(plan.lease.uid, plan.lease.gid)
  if (policy.signal?.aborted) {
    void releasePlan(plan)
    return finish(plan.tier, { kind: 'canceled', limit: 'signal', message: 'canceled before start' })
  }
  let cgroup: SandboxCgroup | null = null
  try {
    cgroup = plan.cgroup && SandboxCgroup.create(plan.cgroup.support, plan.cgroup.writes, plan.cgroup.dirs)
  } catch (error) {
    void releasePlan(plan)
    const message = `could not create the sandbox cgroup: ${(error as Error).message}`
    return finish(plan.tier, { kind: 'error', limit: 'cgroup', message })
  }
  return supervise(plan, policy, cgroup, interactive, call, proxy, redaction)
}

/**
 * Spawn the plan's launcher: through the policy's spawner, else by forking this process (detached: its own
 * session and process group, away from the host's terminal). What cannot start at all (exec refuses the
 * environment's size, the spawner is gone) is a process that failed: 'error', then 'close', so the run
 * ends through the one path that gives everything back.
 */
function startChild(plan: LaunchPlan, policy: Policy, stdin: boolean): Child {
  const stdio = stdioFor(plan, stdin)
  const { file, args, cwd, env } = plan
  try {
    return policy.spawner
      ? policy.spawner.spawn({ file, args, cwd, env, detached: true, stdio: spawnerStdio(stdio) })
      : spawn(file, args, { cwd, env, stdio, detached: true })
  } catch (error) {
    return SpawnedProcess.couldNotStart(error as Error)
  } finally {
    // The launcher has its own copies of the judged paths' fds now (or never will).
    plan.pathFds.close()
  }
}

function supervise(
  plan: LaunchPlan,
  policy: Policy,
  cgroup: SandboxCgroup | null,
  interactive: boolean,
  call: CallChannel | undefined,
  proxy: NetworkProxy | null,
  redaction: Redaction,
): RunHandle<OutputData> {
  const keepStdinOpen = interactive && policy.stdin === undefined
  const { limits } = policy
  const { lease } = plan
  // A uid inherited from a host that died mid-run may still have processes: clean slate first.
  if (lease?.inherited) signalFound(livingByUid(lease.uid), 'SIGKILL', (now) => now.uid === lease.uid)

  const stopper = new Stopper(limits, policy.signal)
  // The caller's own callbacks run inside pipe handlers, where a throw would take the host down: the
  // first one stops the sandbox and becomes the rejection of the result, after the usual clean-up.
  let thrown: { error: unknown } | null = null
  const guarded = <T>(callback: ((value: T) => void) | undefined) =>
    callback &&
    ((value: T) => {
      if (thrown) return
      try {
        callback(value)
      } catch (error) {
        thrown = { error }
        stopper.stop('canceled', false)
      }
    })
  const onOutput = guarded(policy.onOutput)
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
  const logs = new LogCollector(limits.maxLogBytes, redaction, guarded(policy.onLog))
  const started = monotonicMs()
  const child = startChild(plan, policy, keepStdinOpen || policy.stdin !== undefined)
  let launchError: string | null = null
  const fail = (message: string) => {
    launchError ??= message
  }
  const fds = extraFds(child)
  if (plan.seccomp) fds.seccomp?.end(plan.seccomp)
  if (proxy) fds.token?.end(proxy.token)
  fds.log?.on('data', (b: Buffer) => logs.push(b))
  const refused = watchRefusal(fds.refusal)
  if (call) {
    fds.request?.end(call.request)
    fds.reply?.on('data', (b: Buffer) => call.onReply(b))
  }
  let procs: SandboxProcesses | null = null
  /** bwrap reported the program's exit: it ran the program (a refusal of bwrap's is no longer possible). */
  let programRan = () => false
  if (child.pid !== undefined) {
    const leader: Leader = {
      pid: child.pid,
      gone: () => child.exitCode !== null || child.signalCode !== null,
      signal: (sig) => child.kill(sig),
    }
    if (plan.tier === 'namespace') {
      const ns = namespaceProcesses(leader, lease)
      programRan = watchStatus(fds.status, (init) => ns.setInit(init)).programRan
      procs = ns
    } else {
      procs = processTierProcesses(leader, lease)
    }
    if (cgroup) procs = cgroupProcesses(cgroup, procs, plan.tier === 'namespace', leader)
  }
  cgroup?.keepOpen()

  stopper.arm(procs, cgroup && (() => cgroup.cpuMs()))

  child.stdout?.on('data', (b: Buffer) => out.push('stdout', b) || stopper.stop('output-limit', false))
  child.stderr?.on('data', (b: Buffer) => out.push('stderr', b) || stopper.stop('output-limit', false))
  if (child.stdout && child.stderr) takeTurns([child.stdout, child.stderr])
  const releaseStdin = feedStdin(child, policy.stdin, keepStdinOpen)

  const result = new Promise<RunResult<OutputData>>((resolve, reject) => {
    let exited: { code: number | null; signal: NodeJS.Signals | null } | null = null
    let wallMs = 0
    child.on('error', (error) => fail(`could not launch ${plan.file}: ${error.message}`))
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
      if (procs) await reap(procs, 5000)
      releaseStdin()
      const usage = cgroup?.usage() ?? null
      await Promise.all([cgroup?.remove(), proxy?.close(), releasePlan(plan)])
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
      const text = out.finish()
      queue?.end()
      if (thrown) return reject(thrown.error)
      const end = {
        ending,
        output: text,
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
    pid: child.pid,
    output: queue ?? { async *[Symbol.asyncIterator]() {} },
    write: (data) => (keepStdinOpen && child.stdin?.writable ? child.stdin.write(data) : false),
    closeStdin: () => child.stdin?.end(),
    // After the run has closed: nothing at all (see Stopper.close).
    kill: () => stopper.stop('canceled', true),
    result,
  }
}
