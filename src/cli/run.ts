// `cordon run [flags] -- CMD [ARGS...]`: stream live or print one JSON result; exit code says what happened.
import { createReadStream, statSync } from 'node:fs'
import { constants } from 'node:os'
import type { Readable } from 'node:stream'
import { PolicyError } from '../errors.js'
import { run } from '../run/launch.js'
import type { RunResult } from '../run/result.js'
import { policyInput } from './flags.js'

export const EXIT = { limit: 124, cordon: 125, denied: 126, notFound: 127, canceled: 130 } as const

export function exitCodeFor(result: RunResult): number {
  switch (result.status) {
    case 'ok':
      return 0
    case 'nonzero-exit':
      return result.exitCode ?? 1
    case 'signaled':
      return 128 + (constants.signals[result.signal as NodeJS.Signals] ?? 0)
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

function openStdin(value: unknown): Readable | undefined {
  if (value === undefined) return undefined
  if (value === '-') return process.stdin
  const file = String(value)
  try {
    if (!statSync(file).isFile()) throw new Error()
  } catch {
    throw new PolicyError('stdin', `${file} is not a readable file`)
  }
  return createReadStream(file)
}

export async function runCommand(command: string[], values: Record<string, unknown>): Promise<number> {
  const json = values.json === true
  const controller = new AbortController()
  // The CLI, not the library, owns the process's signals: Ctrl-C cancels the sandbox cleanly.
  const cancel = () => controller.abort()
  process.once('SIGINT', cancel)
  process.once('SIGTERM', cancel)
  const stdin = openStdin(values.stdin)
  try {
    const result = await run(command, {
      ...policyInput(values),
      ...(stdin ? { stdin } : {}),
      signal: controller.signal,
      onOutput: json
        ? undefined
        : (chunk) => (chunk.stream === 'stdout' ? process.stdout : process.stderr).write(chunk.data),
    })
    if (json) process.stdout.write(`${JSON.stringify(result)}\n`)
    else if (result.violation) process.stderr.write(`cordon: ${result.status}: ${result.violation.message}\n`)
    return exitCodeFor(result)
  } finally {
    process.off('SIGINT', cancel)
    process.off('SIGTERM', cancel)
    if (stdin && stdin !== process.stdin) stdin.destroy()
    if (stdin === process.stdin) process.stdin.pause()
  }
}
