// A worker process for pg-liveness.test.ts: opens the store (argv[2]) as a worker does (no migration),
// registers with its heartbeat session, claims the run argv[3] with a long lease, says so, and waits to
// be killed.
import { openPgStore } from '../../src/service/pg/open.js'

const [url, runId] = process.argv.slice(2) as [string, string]
const store = await openPgStore(url, { migrate: false })
await store.registerWorker({ id: 'child', host: 'h', pid: process.pid, version: 't', concurrency: 1 })
const fence = await store.claimRun(runId, 'child', 600_000)
process.stdout.write(`${JSON.stringify(fence)}\n`)
setInterval(() => undefined, 60_000)
