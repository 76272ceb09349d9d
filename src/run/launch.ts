// The entry of a run: parse the options, prepare the plan, make the cgroup, then supervise (supervisor.ts).
// What ends before anything is launched (refused, canceled, no cgroup) ends here, as a result.
import { recentCapabilities } from '../host/capabilities.js'
import { SandboxCgroup } from '../host/cgroup.js'
import { forgetHostSockets } from '../host/sockets.js'
import { NetworkProxy } from '../net/proxy.js'
import { prepare, releasePlan } from '../plan/plan.js'
import type { Isolation, RunResult, Violation } from '../policy/result.js'
import {
  type AnyRunOptions,
  type OutputData,
  type Policy,
  parseCommand,
  parsePolicy,
  type RunOptions,
} from '../policy/schema.js'
import { finishedHandle, type RunHandle } from './handle.js'
import { type Redaction, redactionFor, redactionForInput, redactThrown } from './redact.js'
import { unstartedResult } from './result.js'
import { SETUP_ATTEMPTS } from './setup-retry.js'
import { type CallChannel, supervise } from './supervisor.js'
import type { WarmMember, WarmSource } from './warm.js'

export type { RunHandle } from './handle.js'
export type { CallChannel } from './supervisor.js'

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
 * `interactive`: start() — a live output iterator, and stdin left open when none was given. `warm`: where
 * a warm member may be found for this run (see warm.ts); a run that none fits is cold.
 */
export function launch(
  command: readonly string[],
  options: AnyRunOptions,
  interactive: boolean,
  call?: CallChannel,
  warm?: WarmSource,
  attempt = 1,
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
  if (policy.spawner) policy.spawner.assertOpen()
  const redaction = redactionFor(policy)
  const warmRun =
    warm && !call && !policy.signal?.aborted && launchWarm(argv, policy, interactive, warm, redaction)
  if (warmRun) return warmRun
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
  // A stdin stream cannot be read twice: such a run is not launched again (see setup-retry.ts).
  const replayable =
    policy.stdin === undefined || typeof policy.stdin === 'string' || Buffer.isBuffer(policy.stdin)
  const relaunch =
    replayable && attempt < SETUP_ATTEMPTS
      ? () => {
          forgetHostSockets()
          return launch(command, options, interactive, call, undefined, attempt + 1)
        }
      : undefined
  return supervise({ plan, policy, cgroup, interactive, call, proxy, redaction, relaunch })
}

/**
 * The run in a warm member, when one fits it (see warm.ts), or null for a cold run. A refused run is
 * refused here, as it would be cold, and never uses up a member; one the member does not fit gives it back.
 */
function launchWarm(
  argv: string[],
  policy: Policy,
  interactive: boolean,
  source: WarmSource,
  redaction: Redaction,
): RunHandle<OutputData> | null {
  const member = source.take()
  if (!member) return null
  let prepared: ReturnType<typeof prepareWarm>
  try {
    prepared = prepareWarm(argv, policy, member)
  } catch (error) {
    source.giveBack(member, 'other')
    throw redactThrown(error, redaction)
  }
  if (prepared.kind === 'cold') {
    source.giveBack(member, 'other')
    return null
  }
  if (prepared.kind === 'refused') {
    source.giveBack(member, 'other')
    return finishedHandle(unstartedResult(prepared.tier, prepared.violation, policy.encoding, redaction))
  }
  const { plan } = prepared
  const fit = member.fits(plan)
  plan.pathFds.close()
  const stdin = (interactive && policy.stdin === undefined) || policy.stdin !== undefined
  const record = fit === true ? member.record(plan.warm!.activation!, stdin ? 'pipe' : 'null') : null
  if (fit !== true || !record) {
    source.giveBack(member, fit === true ? 'other' : fit)
    return null
  }
  try {
    member.take(plan)
  } catch {
    // Its cgroup refused the run's limits: of no use to any run.
    source.giveBack(member, 'stale')
    return null
  }
  const handle = supervise({
    plan,
    policy,
    cgroup: member.cgroup,
    interactive,
    call: undefined,
    proxy: null,
    redaction,
    warm: { member, record },
  })
  source.used(member, handle.result)
  return handle
}

/** This run's plan as the member's would be (its uid and cgroup): compared with the member's own. */
function prepareWarm(argv: string[], policy: Policy, member: WarmMember) {
  const caps = recentCapabilities(policy.cgroup.parent)
  return prepare(argv, policy, caps, undefined, undefined, { seed: member.seed })
}
