// A finished run's text (its result's stdout, stderr and output) rebuilt from its stored output events, a
// few at a time. The store keeps a run's output once, as the program's bytes (its events), not a second
// and third time as escaped JSON text: 16 MiB of control characters was 192 MB of result, parsed whole on
// every read. The text is decoded as the worker's TextOfChunks decodes it: each stream with its own
// streaming UTF-8 decoder (a character cut across events comes out whole, an invalid byte as U+FFFD), and
// `output` as the events interleave the streams.
import { StringDecoder } from 'node:string_decoder'
import type { RunResult } from '../index.js'
import {
  type OutputStream,
  type RunRecord,
  runView,
  type Store,
  type StoredResult,
  TEXT_FIELDS,
  type TextField,
} from './types.js'

/** Output events read at once: a piece of text is one event's (at most 64 KiB of bytes). */
const CHUNKS_AT_ONCE = 4

/**
 * The text of `field` (`output`: both streams, as the events interleave them), a piece at a time, each
 * piece whole characters. Throws when the run's events are gone before its end (deleted meanwhile).
 */
export function* textPieces(store: Store, runId: string, field: OutputStream): Generator<string> {
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') }
  const end = store.outputEnd(runId, field)
  let at = 0
  while (at < end) {
    const chunks = store.outputChunks(runId, field, at, CHUNKS_AT_ONCE)
    if (chunks.length === 0) throw new Error(`the output of run ${runId} is gone`)
    for (const chunk of chunks) {
      const text = decoders[chunk.stream].write(chunk.bytes)
      if (text) yield text
      at = chunk.end
    }
  }
  // What each decoder holds at the end (a cut character: U+FFFD), stdout's first, as TextOfChunks has it.
  const rest =
    (field === 'stderr' ? '' : decoders.stdout.end()) + (field === 'stdout' ? '' : decoders.stderr.end())
  if (rest) yield rest
}

/** A stored result made whole: its text rebuilt from the run's events when it was kept as them. */
export function wholeResult(store: Store, runId: string, stored: StoredResult): RunResult {
  const text = (field: TextField) =>
    stored.textFromEvents ? [...textPieces(store, runId, field)].join('') : (stored.result[field] ?? '')
  return { ...stored.result, stdout: text('stdout'), stderr: text('stderr'), output: text('output') }
}

/**
 * The JSON of a run's whole view (`GET /v1/runs/{id}`), a piece at a time: one output event's text,
 * escaped, at most (~6 times 64 KiB), however long the output. The result's text fields come last.
 */
export function* viewJson(store: Store, run: RunRecord): Generator<string> {
  const stored = run.state === 'finished' ? store.storedResult(run.id) : null
  if (!stored) {
    yield JSON.stringify(runView(run, null))
    return
  }
  if (!stored.textFromEvents) {
    yield JSON.stringify(runView(run, wholeResult(store, run.id, stored)))
    return
  }
  // `result` is the view's last field, and its text goes at the end of it: the view without its text,
  // but for the two closing braces, then each text field, then the braces.
  const head = JSON.stringify(runView(run, stored.result as RunResult))
  yield head.slice(0, -2)
  let comma = !head.endsWith('{}}')
  for (const field of TEXT_FIELDS) {
    yield `${comma ? ',' : ''}"${field}":"`
    comma = true
    for (const piece of textPieces(store, run.id, field)) yield JSON.stringify(piece).slice(1, -1)
    yield '"'
  }
  yield '}}'
}

/** How many bytes `text` is as a JSON string (quotes included), as JSON.stringify writes it in UTF-8. */
export function jsonTextBytes(text: string): number {
  let n = 2
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20) n += c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6
    else if (c === 0x22 || c === 0x5c) n += 2
    else if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdfff) {
      // A pair is one character of 4 bytes; a lone surrogate is written escaped, \udXXX.
      const pair = c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
      n += pair ? 4 : 6
      if (pair) i++
    } else n += 3
  }
  return n
}
