// How the SQLite store's rows read and are written: runs, events and keys as the store's types, an output
// event's place in its streams, a finished run's stored result, the listing cursor.
import { randomBytes } from 'node:crypto'
import type { RunResult } from '../../index.js'
import { jsonTextBytes } from '../text.js'
import {
  type EndResult,
  endResult,
  type KeyRecord,
  type RunEvent,
  type RunEventType,
  type RunRecord,
  type RunState,
  type Scope,
  TEXT_FIELDS,
} from '../types.js'

/** An output event's place in its stream, from its data (`{ stream, offset, bytes }`); null for any other. */
export function outputPlace(
  type: RunEventType,
  data: Record<string, unknown>,
): { stream: string; end: number; bytes: number } | null {
  if (type !== 'output') return null
  const { stream, offset, bytes } = data
  if (typeof stream !== 'string' || typeof offset !== 'number' || typeof bytes !== 'number') return null
  return { stream, end: offset + bytes, bytes }
}

/** Bytes of runs (request, result, metadata as stored) a listing page holds at most, past its first run. */
export const LIST_PAGE_BYTES = 8 * 1024 * 1024

/** Rows read at once where a read stops early (a page of events, a range of output). */
export const ROWS_AT_ONCE = 16

/** A run id: random and URL-safe (128 bits: unguessable, so a leaked list cannot be walked). */
export function newRunId(): string {
  return `run_${randomBytes(16).toString('base64url')}`
}

/** A run's row as read: its result's summary and command, never its result or request (megabytes each). */
export interface RunRow {
  id: string
  key_id: string
  state: RunState
  created_at: string
  started_at: string | null
  finished_at: string | null
  metadata: string
  cmd: string
  summary: string | null
}

/** The columns of a RunRow. */
export const RUN_COLUMNS = 'id, key_id, state, created_at, started_at, finished_at, metadata, cmd, summary'

export interface EventRow {
  run_id: string
  seq: number
  type: RunEventType
  at: string
  data: string
  /** An output event's bytes (null: an older event's are in its data, as base64). */
  bytes: Buffer | null
}

export interface KeyRow {
  id: string
  name: string
  hash: string
  scopes: string
  ceilings: string
  quota: string
  secrets: string
  retention_ms: number | null
  webhook_secret: string
  created_at: string
  revoked_at: string | null
}

export const toRun = (r: RunRow): RunRecord => ({
  id: r.id,
  keyId: r.key_id,
  state: r.state,
  createdAt: r.created_at,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  metadata: JSON.parse(r.metadata) as Record<string, string>,
  cmd: JSON.parse(r.cmd) as string[],
  result: r.summary === null ? null : (JSON.parse(r.summary) as EndResult),
})

export const toEvent = (r: EventRow): RunEvent => {
  const data = JSON.parse(r.data) as Record<string, unknown>
  // The API's shape: an output event's bytes as base64 in its data, last (as the worker made it).
  if (r.bytes !== null) data.data = r.bytes.toString('base64')
  return { runId: r.run_id, seq: r.seq, type: r.type, at: r.at, data }
}

/** A stored output event's bytes: its own column's, or an older event's base64 in its data. */
export function bytesOf(row: { data: string; bytes: Buffer | null }): Buffer {
  if (row.bytes !== null) return row.bytes
  const data = JSON.parse(row.data) as { data?: unknown }
  return Buffer.from(typeof data.data === 'string' ? data.data : '', 'base64')
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
    textFromEvents: textFromEvents ? 1 : 0,
    viewBytes,
  }
}

export const toKey = (r: KeyRow): KeyRecord => ({
  id: r.id,
  name: r.name,
  hash: r.hash,
  scopes: JSON.parse(r.scopes) as Scope[],
  ceilings: JSON.parse(r.ceilings) as Record<string, unknown>,
  quota: JSON.parse(r.quota) as KeyRecord['quota'],
  secrets: JSON.parse(r.secrets) as Record<string, string>,
  retentionMs: r.retention_ms,
  webhookSecret: r.webhook_secret,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
})

/** The opaque cursor of a page: where the last run of the previous page sorted. */
export function encodeCursor(createdAt: string, id: string): string {
  return Buffer.from(JSON.stringify([createdAt, id])).toString('base64url')
}

export function decodeCursor(cursor: string): [string, string] | null {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string') {
      return [v[0], v[1]]
    }
  } catch {
    // not one of ours
  }
  return null
}
