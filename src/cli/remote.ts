// `cordon run --server URL`: the same flags, output and exit codes as a local run, the run itself made by a
// `cordon serve` (its key from CORDON_API_KEY). The client (src/client/) is imported only here, when
// --server is given: it stays out of the CLI's bundle (scripts/bundle.mjs), and bin.cjs runs a `run
// --server` from the modules, as it does `serve`.
import type { Readable } from 'node:stream'
import type { Client, ClientError } from '../client/index.js'
import { CordonError, PolicyError } from '../errors.js'
import type { NetworkEvent, OutputData, RunResult } from '../index.js'
import type { EndResult } from '../service/types.js'
import { policyInput } from './flags.js'
import { print } from './pipes.js'

/** The server's wait cap: a long-poll asks for it, and again. */
const POLL = '60s'

/** The stream's bytes to its end; null once `signal` aborts (Ctrl-C while a writer holds the pipe open). */
function readAll(stream: Readable, signal: AbortSignal): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    const onData = (chunk: Buffer | string) =>
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
    const settle = (then: () => void) => () => {
      stream.off('data', onData).off('end', onEnd).off('error', onError)
      signal.removeEventListener('abort', onAbort)
      then()
    }
    const onEnd = settle(() => resolve(Buffer.concat(chunks)))
    const onAbort = settle(() => resolve(null))
    const onError = (error: Error) => settle(() => reject(error))()
    if (signal.aborted) return onAbort()
    stream.on('data', onData).once('end', onEnd).once('error', onError)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** The server's refusal as the CLI's own: a field names its flag (`--writable`), the rest is said. */
function refusal(error: ClientError, server: string): Error {
  if (error.field?.startsWith('options.')) return new PolicyError(error.field.slice(8), error.message)
  if (error.field) return new PolicyError(error.field, error.message)
  if (error.status === 0) return new CordonError(`${server}: ${error.message}`)
  const retry = error.retryAfterS !== undefined ? ` (retry after ${error.retryAfterS} s)` : ''
  return new CordonError(`${server}: ${error.status} ${error.code}: ${error.message}${retry}`)
}

/** Until the run finished: its result. */
async function resultOf(client: Client, id: string, signal?: AbortSignal): Promise<RunResult<OutputData>> {
  for (;;) {
    const run = await client.get(id, { wait: POLL, ...(signal ? { signal } : {}) })
    if (run.state === 'finished' && run.result) return run.result
  }
}

/**
 * Submits the run, prints its output live (unless `json`), and resolves with its result (live: the `end`
 * event's, which is all of it but the output, logs and connections, printed already); null when it was
 * canceled (`signal`) and the server could not say how it ended.
 */
export async function remoteRun(
  server: string,
  command: string[],
  values: Record<string, unknown>,
  stdin: Readable | undefined,
  signal: AbortSignal,
): Promise<RunResult<OutputData> | (EndResult & { network?: NetworkEvent[] }) | null> {
  let url: URL
  try {
    url = new URL(server)
  } catch {
    throw new PolicyError('server', `"${server}" is not a URL (http://host:port)`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new PolicyError('server', `"${server}" must be an http:// or https:// URL`)
  const key = process.env.CORDON_API_KEY
  if (!key) throw new PolicyError('server', 'needs the API key in CORDON_API_KEY')
  const options = policyInput(values)
  const bytes = stdin ? await readAll(stdin, signal) : undefined
  // Canceled before anything was submitted: there is no remote run to cancel.
  if (bytes === null || signal.aborted) return null
  const input = bytes ? { stdin: { base64: bytes.toString('base64') } } : {}

  const { connect, ClientError } = await import('../client/index.js')
  const client = connect({ url: server, key })
  let id: string | null = null
  try {
    id = (await client.submit({ cmd: command, options, ...input })).id
    if (signal.aborted) throw signal.reason
    if (values.json !== true) {
      // The connections, for the summary a failed run prints: the end event's result has none.
      const network: NetworkEvent[] = []
      // Base64: the program's bytes as they are, whatever a reconnection splits.
      for await (const event of client.events(id, { encoding: 'base64', signal })) {
        if (event.type === 'output' && typeof event.data.data === 'string') {
          const out = event.data.stream === 'stdout' ? process.stdout : process.stderr
          print(out, Buffer.from(event.data.data, 'base64'))
        } else if (event.type === 'network') {
          const { host, port, allowed, code, reason } = event.data as unknown as NetworkEvent
          network.push({ host, port, allowed, code, reason })
        } else if (event.type === 'end') {
          const result = (event.data as { result?: EndResult }).result
          if (result) return { ...result, network }
        }
      }
    }
    return await resultOf(client, id, signal)
  } catch (error) {
    if (signal.aborted) {
      if (id === null) return null
      // Ctrl-C (or a broken pipe): the remote run is canceled too, and its end told as a local one's.
      try {
        await client.cancel(id)
        const run = await client.get(id, { wait: '10s' })
        return run.result ?? null
      } catch {
        return null
      }
    }
    if (error instanceof ClientError) throw refusal(error, server)
    throw error
  }
}
