// The MCP tools, one implementation for both transports: `cordon mcp` (stdio, an in-process service of its
// own) and `/mcp` on `cordon serve` (the serving process's service, the caller's key). Each tool is a call
// of the Service with the key the server was given, so the key's scopes and ceilings are the policy: a tool
// can ask for less, never more. Run ids, stored output, paging, stdin, cancel and list are the service's.
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { CallToolResult, ServerNotification } from '@modelcontextprotocol/sdk/types.js'
import * as z from 'zod'
import type { FunctionResult, RunResult } from '../index.js'
import { keyCeilings } from '../service/key-schema.js'
import type { KeyRecord, RunRecord, Service } from '../service/types.js'
import { boundsText, packageVersion } from './about.js'
import { cutRange, cutToBudget } from './budget.js'
import {
  answerBytes,
  boundaryOutput,
  cancelOutput,
  escapedDeep,
  FRAMING,
  filesInput,
  guarded,
  lastLine,
  limitsInput,
  networkInput,
  RESOURCE_BYTES,
  resultOutput,
  runOutput,
  STATES,
  STREAMS,
  type Stream,
  shortCmd,
  sleep,
  uriOf,
} from './shapes.js'
import { escapeText, framed, newBoundary, shownJsonBytes } from './text.js'

export { answerBytes, RESOURCE_BYTES }

/** A function the operator registered for `call_function`. */
export interface McpFunctions {
  names: string[]
  call(name: string, args: unknown[], signal: AbortSignal): Promise<FunctionResult>
}

export interface McpToolsOptions {
  service: Service
  /** Every tool acts as this key: its scopes and ceilings bound what a tool may do. */
  key: KeyRecord
  /** Bytes of each text (content and the result's text fields) a tool returns; the rest is paged. */
  budget: number
  /** Options every run gets, set by the operator (`cordon mcp`'s flags), which no tool input can set. */
  fixedOptions?: Record<string, unknown>
  /** The longest a tool call waits (run, read_output, cancel_run), ms. Default 5 min. */
  maxWaitMs?: number
  /**
   * Waits held at once (each holds a connection on /mcp): a call that gets no slot answers at once, as
   * with wait_ms 0, rather than being refused. Default: no bound (stdio has one client).
   */
  holds?: { take(): boolean; give(): void }
  /** The `run` tool's wait when the call names none, ms. Default 20 s (clients time out at about 60 s). */
  defaultWaitMs?: number
  /** Functions `call_function` may call; the tool exists only when there are some. */
  functions?: McpFunctions
  /** The version the server reports; default: the package's. */
  version?: string
  /** Host paths the runs may write (`cordon mcp --writable`): what outlives a call, as the run tool says. */
  persistent?: string[]
  /**
   * The bytes this server's answers hold until they are sent (/mcp: the serving app's budget, per key and
   * in all). Each result takes its size before it is returned; a result with no room is a `busy` tool
   * error instead. Default: no bound (stdio has one client, which reads its answers in turn).
   */
  answers?: AnswerBytes
}

/** A budget of answer bytes, as /mcp gives one for each request. */
export interface AnswerBytes {
  /**
   * Takes `bytes` for an answer about to be sent; false when there is no room for it now. Not
   * `refusable`: taken past the budget if need be (counted, so that reads wait).
   */
  take(bytes: number, opts?: { refusable?: boolean }): boolean
}

export function createMcpServer(options: McpToolsOptions): McpServer {
  const { service, key, budget } = options
  const maxWaitMs = options.maxWaitMs ?? 300_000
  const defaultWaitMs = Math.min(options.defaultWaitMs ?? 20_000, maxWaitMs)
  const fixed = options.fixedOptions ?? {}
  const ceilings = keyCeilings(key)
  // Open-world: the runs may reach hosts the server does not control. A key without a network ceiling
  // gets none (ceilings.ts).
  const mayRead = key.scopes.includes('runs:read') || key.scopes.includes('admin')
  const networkOn =
    ceilings.network === undefined
      ? false
      : Array.isArray(ceilings.network)
        ? ceilings.network.some((m) => m !== 'none')
        : ceilings.network !== 'none'
  const server = new McpServer(
    { name: 'cordon', version: options.version ?? packageVersion() },
    {
      instructions:
        'Runs commands in a sandbox under kernel-enforced limits the server sets. `run` starts one and ' +
        'waits a while; a run still going is followed with read_output, fed with write_stdin, stopped with ' +
        'cancel_run. Long output is cut to head and tail; read_output pages the rest. ' +
        FRAMING,
    },
  )

  /** `wait()` within a hold slot; without one, `now()` at once. */
  const held = async <T>(wait: () => Promise<T>, now: () => T): Promise<T> => {
    if (!options.holds) return wait()
    if (!options.holds.take()) return now()
    try {
      return await wait()
    } finally {
      options.holds.give()
    }
  }

  const cut = (text: string, runId: string, stream: Stream, boundary: string, offset = 0) =>
    cutToBudget(text, budget, { runId, stream, offset, boundary }).text

  /** A tool's answer: its refusal as a tool error, and only if the answers being sent have room for it. */
  const answer = async (body: () => Promise<CallToolResult> | CallToolResult, refusable = true) =>
    sized(await guarded(body), refusable)

  /**
   * An action's answer (run, write_stdin, cancel_run, call_function): the action is done by the time it is
   * sized, so it is sent past the budget if need be, never `busy` (a client retrying a refused `run` would
   * make the run again). Its texts are within the output budget.
   */
  const act = (body: () => Promise<CallToolResult> | CallToolResult) => answer(body, false)

  const busy: CallToolResult = {
    isError: true,
    content: [{ type: 'text', text: 'busy: the server is sending too many big answers at once: retry' }],
  }
  /** Results whose size was taken before they were built (read_output's). */
  const presized = new WeakSet<CallToolResult>()
  /** A result, if the answers being sent have room for it; else a `busy` tool error. */
  const sized = (result: CallToolResult, refusable: boolean): CallToolResult => {
    if (!options.answers || result.isError || presized.has(result)) return result
    return options.answers.take(answerBytes(result), { refusable }) ? result : busy
  }

  /**
   * The first items of a list whose JSON fits the budget, and how many were left out: a program writing
   * its log channel full (maxLogBytes, 256 KiB by default) or making 1000 connections would otherwise
   * put all of it in the result, past the budget the output is held to.
   */
  const firstWithin = <T>(items: T[]): { kept: T[]; omitted: number } => {
    let bytes = 2
    let n = 0
    while (n < items.length) {
      bytes += Buffer.byteLength(JSON.stringify(items[n]) ?? 'null') + 1
      if (bytes > budget) break
      n++
    }
    return { kept: items.slice(0, n), omitted: items.length - n }
  }

  /**
   * The RunResult with its text fields, log lines and connections within the budget: what
   * structuredContent carries. `logsOmitted`, `networkOmitted`: how many were left out.
   */
  const shownResult = (runId: string, result: RunResult, boundary: string): RunResult => {
    // The program writes its log lines and names the hosts it reaches: their strings are its text too.
    const logs = firstWithin(escapedDeep(result.logs ?? []))
    const network = firstWithin(escapedDeep(result.network ?? []))
    return {
      ...result,
      stdout: cut(result.stdout, runId, 'stdout', boundary),
      stderr: cut(result.stderr, runId, 'stderr', boundary),
      output: cut(result.output, runId, 'output', boundary),
      violation: result.violation
        ? { ...result.violation, message: escapeText(result.violation.message, { inLine: true }) }
        : null,
      logs: logs.kept,
      network: network.kept,
      ...(logs.omitted > 0 ? { logsOmitted: logs.omitted } : {}),
      ...(network.omitted > 0 ? { networkOmitted: network.omitted } : {}),
    }
  }

  /** A run as a tool result: a short summary and the output within the budget, and the structured run. */
  const runAnswer = (run: RunRecord, waitedMs: number): CallToolResult => {
    const link = {
      type: 'resource_link' as const,
      uri: uriOf(run.id, 'output'),
      name: `output of ${run.id}`,
      mimeType: 'text/plain',
      description: 'the whole output (stdout and stderr interleaved), as kept',
    }
    // The whole result, its text rebuilt from the run's events (a run's record holds its summary only).
    const r = run.result ? service.result(key, run.id) : null
    if (r) {
      const how =
        r.status === 'ok' || r.status === 'nonzero-exit'
          ? `exit code ${r.exitCode}`
          : r.signal
            ? `signal ${r.signal}`
            : r.status
      const lines = [
        `run ${run.id} finished: ${r.status} (${how}) in ${r.wallMs} ms, ${r.outputBytes} bytes of output${r.truncated ? ' (truncated by the output limit)' : ''}`,
      ]
      // An error names the field it is about (`options.writable`: the operator's path the sandbox cannot reach).
      const message = r.violation ? escapeText(r.violation.message, { inLine: true }) : ''
      if (r.violation)
        lines.push(
          r.violation.kind === 'error'
            ? `error: ${r.violation.limit}: ${message}`
            : `${r.violation.kind}: ${message}`,
        )
      const boundary = newBoundary()
      const text =
        r.output === ''
          ? '(no output)'
          : framed('output', boundary, cut(r.output, run.id, 'output', boundary))
      return {
        content: [{ type: 'text', text: `${lines.join('\n')}\n${text}` }, link],
        structuredContent: {
          run_id: run.id,
          state: run.state,
          result: shownResult(run.id, r, boundary),
          boundary,
        },
      }
    }
    // Only what is shown is read, by range, up to the length taken first (output only grows): the output
    // so far (up to the output ceiling, 16 MiB) was read whole for each answer to show a budget of it.
    const bytes = service.outputBytes(key, run.id, 'output')
    const read = (offset: number, length: number) => service.output(key, run.id, 'output', offset, length)
    const boundary = newBoundary()
    const shown = cutRange(bytes, budget, read, { runId: run.id, stream: 'output', boundary }).text
    const text =
      `run ${run.id} is ${run.state} after ${(waitedMs / 1000).toFixed(1)} s; ${bytes} bytes of output so far:\n` +
      `${bytes === 0 ? '(none yet)' : framed('output', boundary, shown)}\n` +
      `Follow it with read_output run_id=${run.id} offset=${bytes} wait_ms=…, or stop it with cancel_run.`
    return {
      content: [{ type: 'text', text }, link],
      structuredContent: { run_id: run.id, state: run.state, output: { text: shown, bytes }, boundary },
    }
  }

  server.registerTool(
    'run',
    {
      title: 'Run a command in a sandbox',
      description:
        'Run a command (an argv array `cmd`, or a `shell` line for sh -c) in a fresh sandbox under the ' +
        'server’s limits, and wait up to wait_ms for it. Returns its result, or, if it is still going, its ' +
        `run_id and output so far. Output past ${budget} bytes is cut to head and tail; read_output pages it. ` +
        FRAMING +
        ` ${boundsText(service.bounds(key), fixed, options.persistent ?? [])}`,
      inputSchema: {
        cmd: z.array(z.string()).min(1).optional().describe('the program and its arguments'),
        shell: z.string().optional().describe('a shell command line, run as sh -c (instead of cmd)'),
        stdin: z.string().optional().describe('text the program reads on stdin'),
        stdin_open: z
          .boolean()
          .optional()
          .describe('keep stdin open after `stdin` for write_stdin (close it with write_stdin close=true)'),
        files: filesInput,
        limits: limitsInput.optional(),
        network: networkInput,
        wait_ms: z
          .number()
          .int()
          .min(0)
          .max(maxWaitMs)
          .optional()
          .describe(`how long to wait for the run to finish, ms (default ${defaultWaitMs})`),
      },
      outputSchema: runOutput,
      annotations: {
        title: 'Run a command in a sandbox',
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: networkOn,
      },
    },
    (input, extra) =>
      act(async () => {
        if ((input.cmd === undefined) === (input.shell === undefined))
          return {
            isError: true,
            content: [{ type: 'text', text: 'invalid: give either cmd (an argv array) or shell (a line)' }],
          }
        // `run` waits for the run, which reads it: a key that may not is told before a run is made.
        if (!key.scopes.includes('runs:read') && !key.scopes.includes('admin'))
          return {
            isError: true,
            content: [{ type: 'text', text: 'forbidden: this key lacks the runs:read scope that run needs' }],
          }
        const cmd = input.cmd ?? ['sh', '-c', input.shell as string]
        const runOptions: Record<string, unknown> = { ...fixed }
        if (input.limits) runOptions.limits = input.limits
        if (input.network !== undefined) runOptions.network = input.network
        const body: Record<string, unknown> = { cmd, options: runOptions, metadata: { via: 'mcp' } }
        if (input.files) body.files = input.files
        if (input.stdin_open) body.stdin = 'open'
        else if (input.stdin !== undefined) body.stdin = input.stdin
        // Cancelled before this handler ran (the SDK validates the input first, and a cancellation read
        // in the same chunk as the call lands meanwhile): no run, as no abort event is coming.
        if (extra.signal.aborted)
          return { isError: true, content: [{ type: 'text', text: 'canceled: the call was cancelled' }] }
        const started = Date.now()
        const submitted = service.submit(key, body)
        const id = submitted.id
        if (input.stdin_open && input.stdin) service.writeStdin(key, id, Buffer.from(input.stdin, 'utf8'))

        // The client gave up on the call: the sandbox goes with it.
        const onAbort = () => {
          try {
            service.cancel(key, id)
          } catch {
            // finished or gone meanwhile
          }
        }
        extra.signal.addEventListener('abort', onAbort, { once: true })
        const stopProgress = followProgress(id, extra)
        try {
          const run = await held(
            () => service.wait(key, id, input.wait_ms ?? defaultWaitMs),
            () => service.get(key, id),
          )
          return runAnswer(run, Date.now() - started)
        } finally {
          stopProgress()
          extra.signal.removeEventListener('abort', onAbort)
        }
      }),
  )

  /**
   * With a progress token, each new output line (at most one notification per 250 ms) goes to the
   * client as a progress notification; progress counts output bytes, so it only grows.
   */
  const followProgress = (
    id: string,
    extra: {
      _meta?: { progressToken?: string | number }
      sendNotification(n: ServerNotification): Promise<void>
    },
  ): (() => void) => {
    const token = extra._meta?.progressToken
    if (token === undefined) return () => undefined
    let bytes = 0
    let line = ''
    let sentAt = 0
    let timer: NodeJS.Timeout | undefined
    const send = () => {
      timer = undefined
      sentAt = Date.now()
      extra
        .sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress: bytes, message: line },
        })
        .catch(() => undefined)
    }
    const { stop } = service.events(key, id, 0, (event) => {
      if (event.type !== 'output') return
      const data = Buffer.from(String(event.data.data ?? ''), 'base64')
      bytes += data.length
      const newest = escapeText(lastLine(data.toString('utf8')), { inLine: true })
      if (newest !== '') line = newest
      if (timer) return
      timer = setTimeout(send, Math.max(0, 250 - (Date.now() - sentAt)))
    })
    return () => {
      stop()
      if (timer) clearTimeout(timer)
    }
  }

  server.registerTool(
    'read_output',
    {
      title: 'Read a run’s output',
      description:
        'Read a page of a run’s kept output from a byte offset: stdout, stderr, or both interleaved ' +
        '("output", the default). With wait_ms, waits that long for output past the offset (or the end). ' +
        FRAMING,
      inputSchema: {
        run_id: z.string(),
        stream: z.enum(STREAMS).optional().describe('default "output": stdout and stderr interleaved'),
        offset: z.number().int().min(0).optional().describe('bytes to skip (default 0)'),
        limit: z
          .number()
          .int()
          .min(1)
          .max(1024 * 1024)
          .optional()
          .describe(`bytes to read at most (default ${budget})`),
        wait_ms: z.number().int().min(0).max(maxWaitMs).optional().describe('wait for new output, ms'),
      },
      outputSchema: {
        run_id: z.string(),
        state: z.enum(STATES),
        stream: z.enum(STREAMS),
        offset: z.number(),
        next_offset: z.number(),
        data: z.string().describe('the page as text, its control characters escaped'),
        eof: z.boolean().describe('the run is finished and nothing is left past next_offset'),
        boundary: boundaryOutput,
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (input, extra) =>
      answer(async () => {
        const stream = input.stream ?? 'output'
        const offset = input.offset ?? 0
        const limit = input.limit ?? budget
        let run = service.get(key, input.run_id)
        let page = service.output(key, run.id, stream, offset, limit)
        // A short poll: output is stored as it comes, and the wait ends at the first byte past the offset.
        const poll = async () => {
          const deadline = Date.now() + (input.wait_ms ?? 0)
          while (
            page.length === 0 &&
            run.state !== 'finished' &&
            Date.now() < deadline &&
            !extra.signal.aborted
          ) {
            await sleep(Math.min(200, deadline - Date.now()))
            run = service.get(key, run.id)
            page = service.output(key, run.id, stream, offset, limit)
          }
        }
        if (page.length === 0 && run.state !== 'finished' && input.wait_ms) await held(poll, () => undefined)
        const next = offset + page.length
        const eof = run.state === 'finished' && service.output(key, run.id, stream, next, 1).length === 0
        // A page is up to 1 MiB, shown twice (the text and `data`), up to 5 bytes of JSON a byte: its
        // size is taken before it is decoded and escaped, from the bytes, so a call with no room builds
        // nothing (100 of them in one batch built 1.5 GiB of strings only to refuse them).
        if (options.answers && !options.answers.take(2 * shownJsonBytes(page) + 1024)) return busy
        const data = escapeText(page.toString('utf8'))
        const boundary = newBoundary()
        const after = eof
          ? `: end of ${stream}, run ${run.id} ${run.result?.status ?? 'finished'}`
          : `: more at read_output run_id=${run.id} stream=${stream} offset=${next}; run is ${run.state}`
        const detail = `: run ${run.id}, bytes ${offset} to ${next}`
        const result: CallToolResult = {
          content: [{ type: 'text', text: framed(stream, boundary, data, { detail, after }) }],
          structuredContent: {
            run_id: run.id,
            state: run.state,
            stream,
            offset,
            next_offset: next,
            data,
            eof,
            boundary,
          },
        }
        if (options.answers) presized.add(result)
        return result
      }),
  )

  server.registerTool(
    'write_stdin',
    {
      title: 'Write to a run’s stdin',
      description:
        'Write text to the stdin of a run started with stdin_open=true; close=true closes it (EOF) after.',
      inputSchema: {
        run_id: z.string(),
        data: z.string(),
        close: z.boolean().optional(),
      },
      outputSchema: {
        run_id: z.string(),
        state: z.enum(STATES).optional().describe('absent when the key lacks runs:read'),
        written: z.number(),
        closed: z.boolean(),
      },
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    (input) =>
      act(() => {
        const data = Buffer.from(input.data, 'utf8')
        if (data.length > 0) service.writeStdin(key, input.run_id, data)
        if (input.close) service.closeStdin(key, input.run_id)
        // The write is done: a key that may not read runs is told so, not the run's state.
        const state = mayRead ? service.get(key, input.run_id).state : undefined
        return {
          content: [
            {
              type: 'text',
              text: `wrote ${data.length} bytes to run ${input.run_id}${input.close ? ' and closed its stdin' : ''}`,
            },
          ],
          structuredContent: {
            run_id: input.run_id,
            ...(state ? { state } : {}),
            written: data.length,
            closed: !!input.close,
          },
        }
      }),
  )

  server.registerTool(
    'cancel_run',
    {
      title: 'Cancel a run',
      description: 'Stop a run (its whole sandbox) and return its result.',
      inputSchema: { run_id: z.string() },
      outputSchema: cancelOutput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (input) =>
      act(async () => {
        const started = Date.now()
        service.cancel(key, input.run_id)
        // The cancel is done; its result is for a key that may read the run (as on POST …/cancel).
        if (!mayRead)
          return {
            content: [{ type: 'text', text: `canceled run ${input.run_id}` }],
            structuredContent: { run_id: input.run_id },
          }
        // The sandbox is killed as a whole (SIGTERM, then SIGKILL after the grace): soon over.
        const run = await service.wait(key, input.run_id, Math.min(10_000, maxWaitMs))
        return runAnswer(run, Date.now() - started)
      }),
  )

  server.registerTool(
    'list_runs',
    {
      title: 'List runs',
      description:
        'The runs of this server (newest first), with their state and status; long commands shortened.',
      inputSchema: {
        state: z.enum(STATES).optional(),
        limit: z.number().int().min(1).max(100).optional().describe('default 20'),
        cursor: z.string().optional().describe('next_cursor of a previous page'),
      },
      outputSchema: {
        runs: z.array(
          z.object({
            run_id: z.string(),
            state: z.enum(STATES),
            status: z.string().nullable(),
            created_at: z.string(),
            cmd: z.array(z.string()),
          }),
        ),
        next_cursor: z.string().nullable(),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (input) =>
      answer(() => {
        const { runs, nextCursor } = service.list(key, {
          limit: input.limit ?? 20,
          ...(input.state ? { state: input.state } : {}),
          ...(input.cursor ? { cursor: input.cursor } : {}),
        })
        const rows = runs.map((r) => ({
          run_id: r.id,
          state: r.state,
          status: r.result?.status ?? null,
          created_at: r.createdAt,
          // An admin lists every key's runs: a command is another tenant's text, shown on one line.
          cmd: shortCmd(r.cmd).map((arg) => escapeText(arg, { inLine: true })),
        }))
        const text =
          rows
            .map((r) => `${r.run_id}\t${r.state}\t${r.status ?? '-'}\t${r.created_at}\t${r.cmd.join(' ')}`)
            .join('\n') || '(no runs)'
        return {
          content: [{ type: 'text', text: nextCursor ? `${text}\n[more: cursor=${nextCursor}]` : text }],
          structuredContent: { runs: rows, next_cursor: nextCursor },
        }
      }),
  )

  const functions = options.functions
  if (functions && functions.names.length > 0) {
    const names = functions.names as [string, ...string[]]
    server.registerTool(
      'call_function',
      {
        title: 'Call a registered function',
        description: `Call one of the functions the server registered (${names.join(', ')}) in a sandbox with JSON arguments, and return its value.`,
        inputSchema: {
          name: z.enum(names),
          args: z.array(z.unknown()).optional().describe('its arguments (default none)'),
        },
        outputSchema: {
          state: z.literal('finished'),
          result: resultOutput.extend({ value: z.unknown().optional(), error: z.unknown().optional() }),
        },
        annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: networkOn },
      },
      (input, extra) =>
        act(async () => {
          const result = await functions.call(input.name, input.args ?? [], extra.signal)
          const id = `function:${input.name}`
          // A value JSON cannot carry (a BigInt, a cycle) is said as text.
          let value: unknown = result.value
          try {
            value = value === undefined ? undefined : JSON.parse(JSON.stringify(value))
          } catch {
            value = String(value)
          }
          // The value and the error are the function's, sized by the model's args or the function's
          // output: past the budget, their JSON cut to head and tail (as text), as the output is.
          const boundary = newBoundary()
          const within = (v: unknown): unknown => {
            const json = JSON.stringify(v)
            if (json === undefined || Buffer.byteLength(json) <= budget) return escapedDeep(v, false)
            return cutToBudget(json, budget, { runId: id, stream: 'output', boundary }).text
          }
          const shown = {
            ...shownResult(id, result, boundary),
            value: within(value),
            ...(result.error === undefined ? {} : { error: within(result.error) }),
            boundary,
          }
          const said = (what: string, v: unknown) =>
            framed(
              what,
              boundary,
              cutToBudget(JSON.stringify(v) ?? 'undefined', budget, { runId: id, stream: 'output', boundary })
                .text,
            )
          const text = result.error
            ? `${input.name} failed (${result.status}):\n${said('error', result.error)}`
            : result.status === 'ok'
              ? `${input.name} returned:\n${said('value', value)}`
              : `${input.name}: ${result.status}${result.violation ? `: ${escapeText(result.violation.message, { inLine: true })}` : ''}`
          return {
            content: [{ type: 'text', text }],
            structuredContent: { state: 'finished', result: shown },
            ...(result.status === 'ok' && !result.error ? {} : { isError: true }),
          }
        }),
    )
  }

  // The whole kept output of a run, as a resource the run's results link to.
  server.registerResource(
    'run-output',
    new ResourceTemplate('cordon://runs/{run_id}/{stream}', { list: undefined }),
    {
      title: 'A run’s output',
      description: 'stdout, stderr or output (both interleaved) of a run, as kept',
      mimeType: 'text/plain',
    },
    (uri, variables) => {
      const id = String(variables.run_id)
      const stream = String(variables.stream) as Stream
      if (!STREAMS.includes(stream)) throw new Error(`no stream ${stream}: stdout, stderr or output`)
      // At most RESOURCE_BYTES (and one byte to tell there is more), cut on a character's start: a run's
      // output (up to the output ceiling) read whole was one answer outside any budget.
      const read = service.output(key, id, stream, 0, RESOURCE_BYTES + 1)
      let end = Math.min(read.length, RESOURCE_BYTES)
      while (end > 0 && end < read.length && ((read[end] as number) & 0xc0) === 0x80) end--
      // Framed and escaped as the tools' texts are: a client may put a resource before its model as well.
      const boundary = newBoundary()
      const after =
        end < read.length
          ? `: the first ${end} bytes; read_output run_id=${id} stream=${stream} offset=${end} for the rest`
          : `: all ${end} bytes`
      const text = framed(stream, boundary, escapeText(read.subarray(0, end).toString('utf8')), {
        detail: `: run ${id}`,
        after,
      })
      const result = { contents: [{ uri: uri.href, mimeType: 'text/plain', text }] }
      if (options.answers && !options.answers.take(answerBytes(result)))
        throw new Error('busy: the server is sending too many big answers at once: retry')
      return result
    },
  )

  return server
}
