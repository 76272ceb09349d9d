// The launcher's refusal pipe (REFUSAL_FD): read by the host alone, written by cordon's launcher alone, and
// only when it refuses to start (or cannot exec the program). A successful exec closes it unwritten.
import type { Readable } from 'node:stream'

/** A refusal is one short line; a path in it is at most PATH_MAX. More than this is not kept. */
const MAX_REFUSAL_BYTES = 8192

/** What the launcher wrote on its refusal pipe, so far (complete once the run's pipes have closed). */
export function watchRefusal(pipe: Readable | undefined): () => string {
  const kept: Buffer[] = []
  let bytes = 0
  pipe?.on('data', (chunk: Buffer) => {
    if (bytes >= MAX_REFUSAL_BYTES) return
    const part = chunk.subarray(0, MAX_REFUSAL_BYTES - bytes)
    kept.push(part)
    bytes += part.length
  })
  return () => Buffer.concat(kept).toString('utf8')
}
