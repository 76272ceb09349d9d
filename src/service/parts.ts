// The parts a service is composed of beside its store, each with an in-process implementation (one
// machine: `cordon serve` alone) and a Redis one (scale-out: API nodes and `cordon worker`s on many
// machines). The store is the truth in both; these carry work and live copies, and losing what they carry
// delays a run or a live event, never loses one: the store's compare-and-set decides who runs a run, and a
// follower that missed an event reads it from the store.
import type { RunEvent } from './types.js'

/** Hands queued runs' ids to workers (API side). */
export interface RunDispatcher {
  /** Idempotent by run id: a run already waiting is not queued twice. */
  enqueue(runId: string): Promise<void>
  /** Takes a run not yet taken out of the queue; false when a worker has it or it is gone. */
  withdraw(runId: string): Promise<boolean>
  /** Runs waiting for a worker, and taken by one. */
  depth(): Promise<{ waiting: number; active: number }>
  close(): Promise<void>
}

/** Takes runs' ids off the queue and runs them, `concurrency` at once (worker side). */
export interface RunConsumer {
  /** `handler` never rejects: everything that happens to a run is its result. */
  start(handler: (runId: string) => Promise<void>): void
  /** Takes no more runs; those running go on. */
  pause(): Promise<void>
  /** Resolves once no run of this consumer is running. */
  idle(): Promise<void>
  readonly running: number
  close(): Promise<void>
}

/** What one node tells the others (or itself): every worker acts on what concerns its runs. */
export type ControlMessage =
  | { type: 'cancel'; runId: string }
  | { type: 'revoke'; keyId: string }
  /** Stdin was written to (or closed for) a run: its worker reads what is new from the store. */
  | { type: 'stdin'; runId: string }

export interface ControlBus {
  publish(message: ControlMessage): Promise<void>
  subscribe(listener: (message: ControlMessage) => void): () => void
  close(): Promise<void>
}

/** Live copies of stored events, across nodes. The store is the truth: a gap is read from it. */
export interface EventBus {
  publish(event: RunEvent): Promise<void>
  /** Resolves once the subscription is in place (an event published after it is delivered). */
  subscribe(runId: string, listener: (event: RunEvent) => void): Promise<() => void>
  /** Called after the bus lost its connection and got it back: followers re-read from the store. */
  onReconnect(listener: () => void): () => void
  close(): Promise<void>
}
