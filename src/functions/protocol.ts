// The request/reply frames of a function call. Values cross by structured clone (v8 serialization:
// Map, Set, Date, BigInt, typed arrays survive); each reply carries the caller's nonce.
import { deserialize, serialize } from 'node:v8'

export interface CallRequest {
  /** file: URL of the module. */
  module: string
  exportName: string
  args: unknown[]
  nonce: string
}

export interface ErrorInfo {
  name: string
  message: string
  stack?: string
}

export type CallReply =
  | { nonce: string; kind: 'value'; value: unknown }
  | { nonce: string; kind: 'threw'; error: ErrorInfo }
  | { nonce: string; kind: 'guard' | 'load-error' | 'no-export' | 'not-cloneable'; error: ErrorInfo }

/** Where the runner's guard (native/guard.c) is, relative to the runner (dist/functions/child.js). */
export const GUARD_FROM_RUNNER = '../../native/cordon-guard.node'

/** What was thrown, as plain data; never throws itself, whatever the value (an object without a prototype, say). */
export function errorInfo(error: unknown): ErrorInfo {
  const text = (v: unknown): string => {
    try {
      return String(v)
    } catch {
      return Object.prototype.toString.call(v)
    }
  }
  if (error instanceof Error) {
    return {
      name: text(error.name),
      message: text(error.message),
      ...(error.stack ? { stack: text(error.stack) } : {}),
    }
  }
  return { name: 'Error', message: text(error) }
}

/** A length-prefixed frame. */
export function frame(message: CallReply): Buffer {
  const payload = serialize(message)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(payload.length)
  return Buffer.concat([header, payload])
}

/**
 * Every reply carrying `nonce`, in order; frames without it (written by the function itself) are ignored.
 * Only the runner should know the nonce, so more than one means something else wrote one.
 */
export function findReplies(data: Buffer, nonce: string): CallReply[] {
  const found: CallReply[] = []
  for (let at = 0; at + 4 <= data.length; ) {
    const length = data.readUInt32BE(at)
    const body = data.subarray(at + 4, at + 4 + length)
    at += 4 + length
    if (body.length < length) break
    try {
      const message = deserialize(body) as CallReply
      if (message && typeof message === 'object' && message.nonce === nonce) found.push(message)
    } catch {
      // not a frame of ours
    }
  }
  return found
}

/** The reply carrying `nonce` when exactly one does; null when none does, or several (one was forged). */
export function findReply(data: Buffer, nonce: string): CallReply | null {
  const replies = findReplies(data, nonce)
  return replies.length === 1 ? replies[0]! : null
}
