// callFunction: run one export of a JavaScript module in a child Node process inside the sandbox, with
// the same limits and policy as run(). Arguments and the return value cross by structured clone.
import { randomUUID } from 'node:crypto'
import { existsSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { serialize } from 'node:v8'
import { PolicyError } from '../errors.js'
import type { RunResult } from '../policy/result.js'
import { type AnyRunOptions, type OutputData, parsePolicy, type RunOptions } from '../policy/schema.js'
import { launch } from '../run/launch.js'
import { redactionFor, redactionForInput, redactThrown } from '../run/redact.js'
import { errorResult, withError } from '../run/result.js'
import { expandedSize } from './expansion.js'
import { type ErrorInfo, GUARD_FROM_RUNNER, scanReplies } from './protocol.js'
import { redactErrorInfo, redactValue } from './redact-value.js'

export interface FunctionResult<T = unknown, D extends OutputData = string> extends RunResult<D> {
  /** The function's return value, when it returned. */
  value?: T
  /** What it threw, or why it could not be called (module did not load, no such export, value not cloneable). */
  error?: ErrorInfo
}

/** More than this on the reply channel is refused: a reply cannot grow the host without bound. */
const MAX_REPLY_BYTES = 64 * 1024 * 1024
/** A value may hold this many slots per byte of its reply (each costs at least one unshared), or at least
 * MIN_EXPANSION: room for sharing within reason, none for a sparse array's free length or 2^n repeats. */
const EXPANSION_PER_BYTE = 4
const MIN_EXPANSION = 1 << 20

/** The compiled runner: beside this file in dist/, or in dist/ when running from src/ (tests, tsx). */
function runnerPath(): string | null {
  const here = path.dirname(fileURLToPath(import.meta.url))
  for (const candidate of [path.join(here, 'child.js'), path.join(here, '../../dist/functions/child.js')]) {
    if (existsSync(candidate)) return candidate
  }
  return null
}

function modulePath(module: string | URL): string {
  const file =
    module instanceof URL || module.startsWith('file:') ? fileURLToPath(module) : path.resolve(module)
  try {
    if (statSync(file).isFile()) return file
  } catch {
    // reported below
  }
  throw new PolicyError('module', `${file} is not a file`)
}

export function callFunction<T = unknown>(
  module: string | URL,
  exportName: string,
  args: readonly unknown[] | undefined,
  options: RunOptions<Buffer>,
): Promise<FunctionResult<T, Buffer>>
export function callFunction<T = unknown>(
  module: string | URL,
  exportName: string,
  args?: readonly unknown[],
  options?: RunOptions,
): Promise<FunctionResult<T>>
export async function callFunction<T = unknown>(
  module: string | URL,
  exportName: string,
  args: readonly unknown[] = [],
  options: AnyRunOptions = {},
): Promise<FunctionResult<T, OutputData>> {
  const file = modulePath(module)
  if (!exportName) throw new PolicyError('exportName', 'must name an export')
  const nonce = randomUUID()
  let request: Buffer
  try {
    request = serialize({ module: pathToFileURL(file).href, exportName, args: [...args], nonce })
  } catch (error) {
    throw new PolicyError('args', `cannot be cloned: ${(error as Error).message}`)
  }
  const runner = runnerPath()
  if (runner === null) {
    // The machine's state, not the caller's input: a result like a missing launcher's. The options are
    // still checked first (as launch() does, an error quoting a secret redacted), so invalid input throws.
    let policy: ReturnType<typeof parsePolicy>
    try {
      policy = parsePolicy(options)
    } catch (error) {
      throw redactThrown(error, redactionForInput(options))
    }
    const message = 'cordon is not built: dist/functions/child.js is missing (npm run build)'
    return errorResult('runner', message, policy)
  }
  // The runner's guard, shown alone (not native/ whole). When it is missing the runner says so and
  // refuses to call the function: the call ends in an error naming it.
  const guard = path.resolve(path.dirname(runner), GUARD_FROM_RUNNER)
  const chunks: Buffer[] = []
  let replyBytes = 0
  const result: FunctionResult<T, OutputData> = await launch([process.execPath, runner], options, false, {
    // The module's directory, cordon's runner and guard and node itself must be readable, even in strict mode.
    visible: [
      path.dirname(file),
      path.dirname(runner),
      ...(existsSync(guard) ? [guard] : []),
      path.dirname(process.execPath),
    ],
    request,
    onReply(data) {
      replyBytes += data.length
      if (replyBytes <= MAX_REPLY_BYTES) chunks.push(data)
    },
  }).result
  // The run's own output, logs and fields are redacted by launch; the value and error are this call's.
  const redaction = redactionFor(parsePolicy(options))
  if (replyBytes > MAX_REPLY_BYTES) {
    return withError(result, 'reply', `the reply exceeded ${MAX_REPLY_BYTES} bytes`)
  }
  const { replies, sizes, forged } = scanReplies(Buffer.concat(chunks), nonce)
  if (replies.length > 1 || forged) {
    // Only the runner should know the nonce: a second reply (or the nonce where no reply begins) means
    // something else wrote it, and what else it wrote is unknown.
    const message =
      replies.length > 1
        ? "more than one reply carried the call's nonce: one was forged, so none is trusted"
        : "the call's nonce was on the reply channel where no reply begins: it was forged, so no reply is trusted"
    return withError(result, 'reply', message)
  }
  const reply = replies[0]
  if (!reply) {
    // It never answered: the run's own status (timeout, memory, ...) says why, unless it has none to say.
    if (result.status !== 'ok') return result
    const message = 'the function ended its process without a reply (process.exit?)'
    return withError(result, 'reply', message)
  }
  if (reply.kind === 'value') {
    // Before anything walks it, the redaction first: a few bytes can describe 2^32 slots or 2^64 nodes.
    // By the reply's own bytes: junk beside it on the channel must not buy room.
    const limit = Math.max(EXPANSION_PER_BYTE * (sizes[0] ?? 0), MIN_EXPANSION)
    if (expandedSize(reply.value, limit) > limit) {
      const message = `the value would expand to more than ${limit} items (a sparse array or references shared over and over); return plain data`
      return withError(result, 'reply', message)
    }
    return { ...result, value: redactValue(reply.value, redaction) as T }
  }
  const error = redactErrorInfo(reply.error, redaction)
  if (reply.kind === 'threw') return { ...result, error }
  // Could not be called at all: that is an error of the call, not of the function.
  return withError({ ...result, error }, reply.kind, error.message, redaction)
}
