// A service in a child process, for service.test.ts's crash recovery: it finishes one run, starts a long
// one, queues one behind it, prints their ids once the long one is running, and waits to be SIGKILLed.
import { createService } from '../../src/service/service.js'

const [dataDir, token] = process.argv.slice(2) as [string, string]
const { service } = await createService({ dataDir, concurrency: 1, useSpawner: false })
const key = service.authenticate(token)
if (!key) throw new Error('no such key')
const done = service.submit(key, { cmd: ['sh', '-c', 'echo done'] })
await service.wait(key, done.id, 20_000)
const long = service.submit(key, { cmd: ['sh', '-c', 'echo started; sleep 8'] })
const queued = service.submit(key, { cmd: ['sh', '-c', 'echo later'] })
const { stop } = service.events(key, long.id, 0, (event) => {
  if (event.type === 'output') {
    stop()
    process.stdout.write(`${JSON.stringify({ done: done.id, long: long.id, queued: queued.id })}\n`)
  }
})
setInterval(() => {}, 1000)
