// `cordon run [flags] -- CMD [ARGS...]`: stream live or print one JSON result; exit code says what happened.
import { accessSync, createReadStream, constants as fsConstants, fstatSync, statSync } from 'node:fs'
import type { Readable } from 'node:stream'
import { PolicyError } from '../errors.js'
import { type NetworkEvent, type OutputData, type RunResult, run, signalNumber } from '../index.js'
import type { EndResult } from '../service/types.js'
import { policyInput } from './flags.js'
import { networkSummary } from './network.js'
import { EXIT_BROKEN_PIPE, pipeBroken, print, whileCancelable } from './pipes.js'
import { remoteRun } from './remote.js'

export const EXIT = { limit: 124, cordon: 125, denied: 126, notFound: 127, canceled: 130 } as const

export function exitCodeFor(result: Pick<RunResult<OutputData>, 'status' | 'exitCode' | 'signal'>): number {
  switch (result.status) {
    case 'ok':
      return 0
    case 'nonzero-exit':
      return result.exitCode ?? 1
    case 'signaled':
      return 128 + (signalNumber(result.signal ?? '') ?? 0)
    case 'denied':
      return EXIT.denied
    case 'not-found':
      return EXIT.notFound
    case 'canceled':
      return EXIT.canceled
    case 'error':
      return EXIT.cordon
    default:
      return EXIT.limit
  }
}

/**
 * What the program reads. Without --stdin, cordon's own stdin when it is a pipe or a file (`echo hi |
 * cordon run -- cat`), as any Unix wrapper passes it on; a terminal (or nothing) gives EOF at once, so a
 * command never waits on a keyboard nobody is typing on. `none` gives EOF whatever stdin is.
 */
function openStdin(value: unknown): Readable | undefined {
  if (value === 'none') return undefined
  if (value === undefined) {
    let st: ReturnType<typeof fstatSync> | null = null
    try {
      st = fstatSync(0)
    } catch {
      // no stdin at all
    }
    return st && (st.isFIFO() || st.isFile() || st.isSocket()) ? process.stdin : undefined
  }
  if (value === '-') return process.stdin
  const file = String(value)
  // Anything readable but a directory: a file, /dev/null, a FIFO, a shell's <(...) as /dev/fd/N. A FIFO's
  // open waits for its writer; createReadStream opens off the main thread, so Ctrl-C still works meanwhile.
  let isDirectory: boolean
  try {
    isDirectory = statSync(file).isDirectory()
    accessSync(file, fsConstants.R_OK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new PolicyError(
      'stdin',
      code === 'ENOENT' ? `${file} does not exist` : `${file} is not readable (${code})`,
    )
  }
  if (isDirectory) throw new PolicyError('stdin', `${file} is a directory`)
  return createReadStream(file)
}

export async function runCommand(command: string[], values: Record<string, unknown>): Promise<number> {
  const json = values.json === true
  const stdin = openStdin(values.stdin)
  try {
    const server = typeof values.server === 'string' ? values.server : null
    const result = await whileCancelable<
      RunResult<OutputData> | (EndResult & { network?: NetworkEvent[] }) | null
    >((signal) => {
      if (server !== null) return remoteRun(server, command, values, stdin, signal)
      // One run, then the process exits: a helper opened for the runs after it would serve none.
      const options = { ...policyInput(values), ...(stdin ? { stdin } : {}), signal, spawner: false as const }
      if (json) return run(command, options)
      // The program's bytes go through as they are (gzip's output must still gunzip): no decoding at all.
      return run(command, {
        ...options,
        encoding: 'buffer',
        onOutput: (chunk) => print(chunk.stream === 'stdout' ? process.stdout : process.stderr, chunk.data),
      })
    })
    // A remote run canceled, whose end the server could not tell.
    if (result === null) return pipeBroken() ? EXIT_BROKEN_PIPE : EXIT.canceled
    if (json) print(process.stdout, `${JSON.stringify(result)}\n`)
    else {
      if (result.violation) print(process.stderr, `cordon: ${result.status}: ${result.violation.message}\n`)
      // A program that failed while connections were refused: say the policy's part in it.
      if (result.status !== 'ok' && result.network)
        print(process.stderr, networkSummary(result.network, result.networkDropped))
    }
    return pipeBroken() ? EXIT_BROKEN_PIPE : exitCodeFor(result)
  } finally {
    // Only when there is a stdin: process.stdin is a getter that would build a stream just to compare it.
    if (stdin && stdin !== process.stdin) stdin.destroy()
    else if (stdin) stdin.pause()
  }
}
