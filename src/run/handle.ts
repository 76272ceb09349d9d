// The handle start() returns, and the one for runs that end before anything is launched.

import type { RunResult } from '../policy/result.js'
import type { OutputChunk, OutputData } from '../policy/schema.js'

export interface RunHandle<D extends OutputData = string> {
  /** Host pid of the launched process: bwrap's monitor, or the process tier's own (the program's parent); undefined if none ran. */
  readonly pid: number | undefined
  /** Output chunks as they arrive; ends when the sandbox has finished. */
  readonly output: AsyncIterable<OutputChunk<D>>
  /** Write to the sandbox's stdin (only when `stdin` was not given: it then stays open until closeStdin). */
  write(data: string | Buffer): boolean
  closeStdin(): void
  /**
   * Stop the sandbox (SIGTERM, then SIGKILL after killGraceMs); the result's status becomes `canceled`.
   * Once the run has ended it does nothing at all: its pids, uid and session may be someone else's by then.
   */
  kill(): void
  readonly result: Promise<RunResult<D>>
}

export function finishedHandle<D extends OutputData>(result: RunResult<D>): RunHandle<D> {
  return {
    pid: undefined,
    output: { async *[Symbol.asyncIterator]() {} },
    write: () => false,
    closeStdin() {},
    kill() {},
    result: Promise.resolve(result),
  }
}
