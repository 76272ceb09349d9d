// What a tool result may hold of a run's output: a model reads every byte of it, and a program printing a
// megabyte would fill its context. Past the budget the text keeps its head and its tail, and says in their
// place exactly what was cut and how to page it (read_output), so nothing is lost, only left on the server.
// The budget holds for the text as shown, its control characters escaped (text.ts): `\x01` is four bytes
// shown for one printed, and 8 KiB of them would otherwise have been 32 KiB of text.
import { escapeText } from './text.js'

/** The default budget of each text a tool returns, bytes (`cordon mcp --output-budget`). */
export const DEFAULT_OUTPUT_BUDGET = 8 * 1024

/** Where a cut text can be read whole: the run and the stream it came from. */
export interface CutSource {
  runId: string
  stream: 'stdout' | 'stderr' | 'output'
  /** Bytes of the stream before `text` (a page read from an offset). */
  offset?: number
  /** The answer's marker token (text.ts's newBoundary): the cut marker carries it. */
  boundary: string
}

const isContinuation = (byte: number | undefined) => byte !== undefined && (byte & 0xc0) === 0x80

/** Bytes of `bytes` as shown: decoded (an invalid byte as U+FFFD), escaped, as UTF-8. */
const shownBytes = (bytes: Buffer) => Buffer.byteLength(escapeText(bytes.toString('utf8')))

/**
 * `text` within `budget` bytes of UTF-8 as shown (escaped): all of it when it fits, else its head and
 * tail (half the budget each, on character boundaries) around a marker naming the bytes cut and the
 * read_output call for them.
 */
export function cutToBudget(text: string, budget: number, source: CutSource): { text: string; cut: number } {
  const bytes = Buffer.from(text, 'utf8')
  return cutRange(bytes.length, budget, (offset, length) => bytes.subarray(offset, offset + length), source)
}

/**
 * cutToBudget of `total` bytes read by range: only what is shown (and the byte after the head, to find a
 * character's start) is read, so the rest of a long output is never loaded.
 */
export function cutRange(
  total: number,
  budget: number,
  read: (offset: number, length: number) => Buffer,
  source: CutSource,
): { text: string; cut: number } {
  if (total <= budget) {
    const all = read(0, total)
    const text = escapeText(all.toString('utf8'))
    if (Buffer.byteLength(text) <= budget) return { text, cut: 0 }
    return cutBytes(total, budget, (offset, length) => all.subarray(offset, offset + length), source)
  }
  return cutBytes(total, budget, read, source)
}

/** The greatest of `candidates` (ascending) for which `ok` holds, `ok` being true up to some point. */
function lastOk(candidates: number[], ok: (n: number) => boolean): number {
  let lo = 0
  let hi = candidates.length - 1
  let best = candidates[0] as number
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const n = candidates[mid] as number
    if (ok(n)) {
      best = n
      lo = mid + 1
    } else hi = mid - 1
  }
  return best
}

/** The head and tail of `total` (> budget) bytes around the marker; `read` gives [offset, offset+length). */
function cutBytes(
  total: number,
  budget: number,
  read: (offset: number, length: number) => Buffer,
  source: CutSource,
): { text: string; cut: number } {
  const half = Math.floor(budget / 2)
  // The head: the longest run of whole characters from the start shown within half the budget. A
  // character starts wherever a byte is not a continuation (the byte after the head is read to know).
  const head = read(0, Math.min(half + 1, total))
  const headEnds = [0]
  for (let i = 1; i <= Math.min(half, head.length); i++) if (!isContinuation(head[i])) headEnds.push(i)
  const headEnd = lastOk(headEnds, (n) => shownBytes(head.subarray(0, n)) <= half)
  // The tail: the shortest whole-character end shown within the other half.
  const tailFrom = Math.max(headEnd, total - half)
  const tail = read(tailFrom, total - tailFrom)
  const tailStarts: number[] = []
  for (let i = 0; i < tail.length; i++) if (!isContinuation(tail[i])) tailStarts.push(i)
  tailStarts.push(tail.length)
  // Descending candidates, as lastOk wants them growing in what they keep: a later start keeps less.
  const fromEnd = tailStarts.map((start) => tail.length - start).reverse()
  const tailKept = lastOk(fromEnd, (kept) => shownBytes(tail.subarray(tail.length - kept)) <= budget - half)
  const tailAt = tail.length - tailKept
  const cut = tailFrom + tailAt - headEnd
  const at = (source.offset ?? 0) + headEnd
  const marker =
    `\n[cut ${source.boundary}: ${cut} bytes; read_output run_id=${source.runId} stream=${source.stream} ` +
    `offset=${at} limit=${cut} for them]\n`
  return {
    text: `${escapeText(head.subarray(0, headEnd).toString('utf8'))}${marker}${escapeText(tail.subarray(tailAt).toString('utf8'))}`,
    cut,
  }
}
