// A called function's value and error with every secret hidden, like its output: strings, object keys,
// Map keys and values, Set members, Errors, boxed strings, RegExp sources, and bytes. The value is the
// host's own fresh copy (deserialized from the reply), so it is changed in place, without recursion: a
// value nested deeper than the stack would otherwise throw instead of returning a result.
import type { Redaction } from '../run/redact.js'
import type { ErrorInfo } from './protocol.js'

/** `value` with every secret hidden (the same object, changed, unless it is a string or a boxed one). */
export function redactValue(value: unknown, redaction: Redaction): unknown {
  if (!redaction.active) return value
  const hide = (text: string) => redaction.apply(text)
  const seen = new Set<object>()
  const todo: object[] = []
  /** A leaf's redacted form, or the value itself after queueing a container. */
  const visit = (v: unknown): unknown => {
    if (typeof v === 'string') return hide(v)
    if (v === null || typeof v !== 'object') return v
    if (v instanceof String) return new String(hide(v.valueOf()))
    if (v instanceof RegExp) {
      const source = hide(v.source)
      return source === v.source ? v : new RegExp(source.replace(/[[\]]/g, '\\$&'), v.flags)
    }
    if (!seen.has(v)) {
      seen.add(v)
      todo.push(v)
    }
    return v
  }
  const root = visit(value)
  for (let item = todo.pop(); item; item = todo.pop()) {
    if (ArrayBuffer.isView(item)) {
      redaction.maskBytes(new Uint8Array(item.buffer, item.byteOffset, item.byteLength))
    } else if (item instanceof ArrayBuffer) {
      redaction.maskBytes(new Uint8Array(item))
    } else if (item instanceof Map) {
      const entries = [...item].map(([k, v]) => [visit(k), visit(v)] as const)
      item.clear()
      for (const [k, v] of entries) item.set(k, v)
    } else if (item instanceof Set) {
      const members = [...item].map(visit)
      item.clear()
      for (const m of members) item.add(m)
    } else if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) item[i] = visit(item[i])
    } else if (!(item instanceof Date)) {
      // Plain objects and Errors: their own properties (an Error's message and stack are own ones), keys too.
      const record = item as Record<string, unknown>
      const names = Object.getOwnPropertyNames(record)
      const entries = names.map((k) => [hide(k), visit(record[k])] as const)
      for (const k of names) delete record[k]
      for (const [k, v] of entries) {
        Object.defineProperty(record, k, { value: v, writable: true, configurable: true, enumerable: true })
      }
      if (item instanceof Error) {
        // The name lives on the prototype unless the function set its own; either way it is shown.
        const name = hide(item.name)
        if (name !== item.name) item.name = name
        for (const k of ['message', 'stack']) {
          if (Object.hasOwn(record, k)) Object.defineProperty(record, k, { enumerable: false })
        }
      }
    }
  }
  return root
}

export function redactErrorInfo(error: ErrorInfo, redaction: Redaction): ErrorInfo {
  if (!redaction.active) return error
  const hide = (text: string) => redaction.apply(text)
  return {
    name: hide(error.name),
    message: hide(error.message),
    ...(error.stack === undefined ? {} : { stack: hide(error.stack) }),
  }
}
