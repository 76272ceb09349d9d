// What a tool result may hold of a run's output: a model reads every byte of it, and a program printing a
// megabyte would fill its context. Past the budget the text keeps its head and its tail, and says in their
// place exactly what was cut and how to page it (read_output), so nothing is lost, only left on the server.

/** The default budget of each text a tool returns, bytes (`cordon mcp --output-budget`). */
export const DEFAULT_OUTPUT_BUDGET = 8 * 1024

/** Where a cut text can be read whole: the run and the stream it came from. */
export interface CutSource {
  runId: string
  stream: 'stdout' | 'stderr' | 'output'
  /** Bytes of the stream before `text` (a page read from an offset). */
  offset?: number
}

const isContinuation = (byte: number | undefined) => byte !== undefined && (byte & 0xc0) === 0x80

/**
 * `text` within `budget` bytes of UTF-8: as it is when it fits, else its head and tail (half the budget
 * each, on character boundaries) around a marker naming the bytes cut and the read_output call for them.
 */
export function cutToBudget(text: string, budget: number, source: CutSource): { text: string; cut: number } {
  const bytes = Buffer.from(text, 'utf8')
  if (bytes.length <= budget) return { text, cut: 0 }
  return cutBytes(bytes.length, budget, (offset, length) => bytes.subarray(offset, offset + length), source)
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
  if (total <= budget) return cutToBudget(read(0, total).toString('utf8'), budget, source)
  return cutBytes(total, budget, read, source)
}

/** The head and tail of `total` (> budget) bytes around the marker; `read` gives [offset, offset+length). */
function cutBytes(
  total: number,
  budget: number,
  read: (offset: number, length: number) => Buffer,
  source: CutSource,
): { text: string; cut: number } {
  const half = Math.floor(budget / 2)
  const head = read(0, half + 1)
  let headEnd = half
  while (headEnd > 0 && isContinuation(head[headEnd])) headEnd--
  const tail = read(total - half, half)
  let tailAt = 0
  while (tailAt < tail.length && isContinuation(tail[tailAt])) tailAt++
  const cut = total - half + tailAt - headEnd
  const at = (source.offset ?? 0) + headEnd
  const marker =
    `\n[… ${cut} bytes cut; read_output run_id=${source.runId} stream=${source.stream} ` +
    `offset=${at} limit=${cut} for them …]\n`
  return {
    text: `${head.subarray(0, headEnd).toString('utf8')}${marker}${tail.subarray(tailAt).toString('utf8')}`,
    cut,
  }
}
