// Run ids carried to workers by BullMQ. BullMQ decides nothing here: a job is only "this run may be
// queued", and the worker that takes it runs it only if the store's compare-and-set (queued -> running)
// says so. A job delivered twice (a stalled lock, a re-add by the orphan sweep), or for a run canceled
// meanwhile, reaches a claim that refuses it; a job lost (Redis restarted without persistence) is found by
// the orphan sweep, which adds it again (idempotent: the job id is the run id).
import type { ConnectionOptions, Queue, Worker } from 'bullmq'
import type { RunConsumer, RunDispatcher } from '../parts.js'
import { redisOptions } from './connection.js'

export interface BullQueueOptions {
  /** The queue's name (default `cordon-runs`): deployments sharing a Redis use different ones. */
  name?: string
  /** Runs at once, for a consumer. */
  concurrency?: number
}

// ioredis' options type is stricter than BullMQ's copy of it (`as ConnectionOptions`); the shape is the same.
async function loadBullmq(): Promise<typeof import('bullmq')> {
  try {
    return await import('bullmq')
  } catch {
    throw new Error('the Redis queue needs the optional packages bullmq and ioredis: npm i bullmq ioredis pg')
  }
}

/** The API side: enqueue and withdraw. */
export class BullDispatcher implements RunDispatcher {
  private constructor(private readonly queue: Queue) {}

  static async open(url: string, { name = 'cordon-runs' }: BullQueueOptions = {}): Promise<BullDispatcher> {
    const { Queue } = await loadBullmq()
    // BullMQ makes (and closes) its own connections from these options.
    const queue = new Queue(name, { connection: redisOptions(url) as ConnectionOptions })
    queue.on('error', () => undefined) // reconnects; a failed enqueue is the orphan sweep's
    return new BullDispatcher(queue)
  }

  async enqueue(runId: string): Promise<void> {
    await this.queue.add(
      'run',
      { runId },
      // One job per run at a time; gone once done (the store keeps the run), a failed one kept an hour to
      // look at. No retry: a run is never restarted behind its submitter's back.
      { jobId: runId, removeOnComplete: true, removeOnFail: { age: 3600 }, attempts: 1 },
    )
  }

  async withdraw(runId: string): Promise<boolean> {
    // remove() answers 1 for a job that is not there too; a worker's job is locked, and answers 0.
    if (!(await this.queue.getJob(runId))) return false
    return (await this.queue.remove(runId)) === 1
  }

  async depth(): Promise<{ waiting: number; active: number }> {
    const counts = await this.queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active')
    return {
      waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0),
      active: counts.active ?? 0,
    }
  }

  async close(): Promise<void> {
    await this.queue.close()
  }
}

/** The worker side: at most `concurrency` runs at once. */
export class BullConsumer implements RunConsumer {
  private worker: Worker | undefined
  private active = 0
  private readonly idleWaiters = new Set<() => void>()

  private constructor(
    private readonly WorkerClass: typeof Worker,
    private readonly url: string,
    private readonly options: BullQueueOptions,
  ) {}

  static async open(url: string, options: BullQueueOptions = {}): Promise<BullConsumer> {
    const { Worker } = await loadBullmq()
    redisOptions(url) // a bad URL fails here, not in the background
    return new BullConsumer(Worker, url, options)
  }

  get running(): number {
    return this.active
  }

  start(handler: (runId: string) => Promise<void>): void {
    if (this.worker) throw new Error('this consumer was started already')
    const { name = 'cordon-runs', concurrency = 2 } = this.options
    this.worker = new this.WorkerClass(
      name,
      async (job) => {
        const runId = (job.data as { runId?: unknown }).runId
        if (typeof runId !== 'string') return
        this.active++
        try {
          await handler(runId)
        } finally {
          this.active--
          if (this.active === 0) for (const w of this.idleWaiters) w()
        }
      },
      {
        connection: redisOptions(this.url) as ConnectionOptions,
        concurrency,
        // The store's lease says whether a worker is alive; BullMQ's lock only keeps a job from being
        // handed out twice meanwhile, and a stalled one is failed, not redelivered (the store's reaper
        // ends its run, and a redelivery would reach a claim that refuses it anyway).
        maxStalledCount: 0,
      },
    )
    this.worker.on('error', () => undefined) // "could not renew lock" after a fence: harmless
  }

  async pause(): Promise<void> {
    await this.worker?.pause(true)
  }

  idle(): Promise<void> {
    if (this.active === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => {
        this.idleWaiters.delete(done)
        resolve()
      }
      this.idleWaiters.add(done)
    })
  }

  async close(): Promise<void> {
    await this.worker?.close(true)
  }
}
