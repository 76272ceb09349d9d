// Type-level tests of `cordon/client`, checked by `npm run typecheck` (tsc over test/): an assertion that
// does not hold, or a `@ts-expect-error` line that is no error, fails the typecheck. Nothing here runs.
import type {
  Client,
  ClientEvent,
  EndResult,
  RequestOptions,
  RunRequestBody,
  RunResult,
} from '../../src/client/index.js'
import type { LogEntry, NetworkEvent, RunOptions } from '../../src/index.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
const holds = <T extends true>(): T | undefined => undefined

declare const client: Client
declare const event: ClientEvent

// run() resolves with text: over HTTP stdout, stderr and output are strings, never Buffers.
type Ran = Awaited<ReturnType<Client['run']>>
holds<Equal<Ran, RunResult>>()
holds<Equal<Ran['stdout'], string>>()
holds<Equal<Ran['output'], string>>()

// Each event's data is typed by its type: `end` carries the EndResult.
if (event.type === 'end') holds<Equal<typeof event.data.result, EndResult>>()
if (event.type === 'output') {
  holds<Equal<typeof event.data.data, string>>()
  holds<Equal<typeof event.data.stream, 'stdout' | 'stderr'>>()
  holds<Equal<typeof event.data.offset, number>>()
}
if (event.type === 'log') holds<Equal<typeof event.data, LogEntry>>()
if (event.type === 'network') holds<Equal<typeof event.data, NetworkEvent>>()
if (event.type === 'interrupted') holds<Equal<typeof event.data.reason, string>>()
if (event.type === 'started') holds<Equal<typeof event.data.pid, number | null>>()

// `options` are the library's own (zod-derived) type, picked to what a request may carry.
holds<Equal<NonNullable<RunRequestBody['options']>, RequestOptions>>()
holds<Equal<NonNullable<RequestOptions['limits']>, NonNullable<RunOptions['limits']>>>()
holds<Equal<RequestOptions['isolation'], RunOptions['isolation']>>()
const body: RunRequestBody = {
  cmd: ['true'],
  options: {
    limits: { wallTimeMs: '5s', memoryBytes: 256 * 1024 * 1024 },
    network: { allow: ['example.com'] },
    env: { A: 'b' },
    redact: ['secret'],
  },
}
void client.submit(body)
void client.run(['true'], { options: { network: 'allow:example.com,+loopback' } })
// @ts-expect-error: a limit is a number or a string such as "5s"
void client.run(['true'], { options: { limits: { wallTimeMs: true } } })
// @ts-expect-error: not a limit
void client.run(['true'], { options: { limits: { wallTime: '5s' } } })
// @ts-expect-error: the network is "none", "host", "allow:…" or an allowlist
void client.run(['true'], { options: { network: 'all' } })
// @ts-expect-error: host paths are the server's alone
void client.run(['true'], { options: { cwd: '/' } })
// @ts-expect-error: JSON carries no RegExp: a request's redactions are strings
void client.run(['true'], { options: { redact: [/secret/] } })
