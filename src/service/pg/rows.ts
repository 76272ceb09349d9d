// Rows of the PostgreSQL store as the service's types: runs, events, keys. Timestamps are timestamptz
// (read as Dates, given back as ISO 8601 UTC strings), json columns arrive parsed.
import type { RunResult } from '../../index.js'
import { jsonTextBytes } from '../text.js'
import {
  type EndResult,
  endResult,
  type RunEvent,
  type RunEventType,
  type RunRecord,
  type RunState,
  TEXT_FIELDS,
} from '../types.js'
import { iso, isoOrNull } from './db.js'

/** The columns of a RunRow: never the request or the result (megabytes each). */
export const RUN_COLUMNS = 'id, key_id, state, created_at, started_at, finished_at, metadata, cmd, summary'

export interface RunRow {
  id: string
  key_id: string
  state: RunState
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
  metadata: Record<string, string>
  cmd: string[]
  summary: EndResult | null
}

export const toRun = (r: RunRow): RunRecord => ({
  id: r.id,
  keyId: r.key_id,
  state: r.state,
  createdAt: iso(r.created_at),
  startedAt: isoOrNull(r.started_at),
  finishedAt: isoOrNull(r.finished_at),
  metadata: r.metadata,
  cmd: r.cmd,
  result: r.summary,
})

/** The columns of an EventRow. */
export const EVENT_COLUMNS = 'run_id, seq, type, at, data, bytes'

export interface EventRow {
  run_id: string
  seq: number
  type: RunEventType
  at: Date
  data: Record<string, unknown>
  /** An output event's bytes. */
  bytes: Buffer | null
}

export const toEvent = (r: EventRow): RunEvent => {
  const data = r.data
  // The API's shape: an output event's bytes as base64 in its data, last (as the worker made it).
  if (r.bytes !== null) data.data = r.bytes.toString('base64')
  return { runId: r.run_id, seq: r.seq, type: r.type, at: iso(r.at), data }
}

/** An output event's place in its stream, from its data (`{ stream, offset, bytes }`); null for any other. */
export function outputPlace(
  type: RunEventType,
  data: Record<string, unknown>,
): { stream: 'stdout' | 'stderr'; end: number; bytes: number } | null {
  if (type !== 'output') return null
  const { stream, offset, bytes } = data
  if ((stream !== 'stdout' && stream !== 'stderr') || typeof offset !== 'number' || typeof bytes !== 'number')
    return null
  return { stream, end: offset + bytes, bytes }
}

/**
 * An event as stored: an output event's bytes as bytes (its data without the base64 of them), and where
 * they end in their stream.
 */
export function storedEvent(type: RunEventType, data: Record<string, unknown>) {
  const out = outputPlace(type, data)
  if (!out || typeof data.data !== 'string') return { data: JSON.stringify(data), bytes: null, out }
  const { data: base64, ...rest } = data
  return { data: JSON.stringify(rest), bytes: Buffer.from(base64 as string, 'base64'), out }
}

/** What finishing a run stores: its result (without its text when it has any), summary and view size. */
export function finishedRow(result: RunResult) {
  const textFromEvents = TEXT_FIELDS.some((f) => result[f] !== '')
  const { stdout, stderr, output, ...rest } = result
  const json = JSON.stringify(textFromEvents ? rest : result)
  let viewBytes = Buffer.byteLength(json)
  if (textFromEvents)
    for (const [field, text] of Object.entries({ stdout, stderr, output }))
      viewBytes += field.length + 4 + jsonTextBytes(text)
  return {
    status: result.status,
    result: json,
    summary: JSON.stringify(endResult(result)),
    textFromEvents,
    viewBytes,
    end: JSON.stringify({ result: endResult(result) }),
  }
}

/**
 * A string as the metadata index holds it: jsonb cannot hold NUL or a lone surrogate, so those are
 * spelled `\uXXXX`, and a backslash `\\` (so that no two strings are spelled alike).
 */
function indexString(s: string): string {
  return s.replace(/\\|\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, (c) =>
    c === '\\' ? '\\\\' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
}

/** Metadata (or a filter of it) as the jsonb its index and its containment test (`@>`) work on. */
export function metadataIndex(metadata: Record<string, string>): string {
  return JSON.stringify(
    Object.fromEntries(Object.entries(metadata).map(([k, v]) => [indexString(k), indexString(v)])),
  )
}

/** The opaque cursor of a page: where the last run of the previous page sorted. */
export function encodeCursor(createdAt: string, id: string): string {
  return Buffer.from(JSON.stringify([createdAt, id])).toString('base64url')
}

/** A cursor's place, or null when it is not one of ours (then the page is empty). */
export function decodeCursor(cursor: string): [string, string] | null {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') {
      // Only a time as we write them: anything else would be an error of the database's, not an empty page.
      const t = Date.parse(v[0])
      if (Number.isFinite(t) && new Date(t).toISOString() === v[0] && !v[1].includes('\0'))
        return [v[0], v[1]]
    }
  } catch {
    // not one of ours
  }
  return null
}
