// A request's JSON body, read the one way every route that takes one reads it (/v1 and /mcp).
import { ServiceError } from '../types.js'

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * How deep a body's arrays and objects may nest. A request nests a handful of levels (a run's
 * `options.network.allow`, a tool call's arguments); 8 MiB of `[` took V8's JSON.parse 3.4 s of the one
 * thread (a flat body of that size: 0.15 s), and is refused by a scan of its bytes first.
 */
export const MAX_JSON_DEPTH = 64

const QUOTE = 0x22
const BACKSLASH = 0x5c

/** The deepest nesting of arrays and objects in JSON text's bytes, stopping past `limit`. */
function depthOf(bytes: Uint8Array, limit: number): number {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number
    if (inString) {
      if (b === BACKSLASH) i++
      else if (b === QUOTE) inString = false
    } else if (b === QUOTE) inString = true
    else if (b === 0x5b || b === 0x7b) {
      depth++
      if (depth > deepest) {
        deepest = depth
        if (deepest > limit) return deepest
      }
    } else if (b === 0x5d || b === 0x7d) depth--
  }
  return deepest
}

/**
 * The path of the first `__proto__` key in a parsed value, or null. JSON.parse makes it an own property;
 * the schemas then drop it without a word (a secret, an env variable or a label named so was silently
 * lost), so it is refused by name instead.
 */
function protoKey(value: unknown, at: string[] = []): string[] | null {
  if (typeof value !== 'object' || value === null) return null
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = protoKey(value[i], [...at, String(i)])
      if (found) return found
    }
    return null
  }
  for (const [k, v] of Object.entries(value)) {
    if (k === '__proto__') return [...at, k]
    const found = protoKey(v, [...at, k])
    if (found) return found
  }
  return null
}

/**
 * A JSON request body: UTF-8 (RFC 8259 allows nothing else), then JSON. A byte that is not UTF-8 is the
 * body's fault, said as such: decoded leniently it became U+FFFD, and a run then ran a command nobody sent.
 * Nesting past MAX_JSON_DEPTH and a `__proto__` key are refused too, naming them.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new ServiceError('invalid', 'body: is not valid UTF-8', 'body')
  }
  if (depthOf(bytes, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    throw new ServiceError('invalid', `body: nests arrays and objects deeper than ${MAX_JSON_DEPTH}`, 'body')
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    throw new ServiceError('invalid', `malformed JSON: ${(error as Error).message}`)
  }
  const proto = protoKey(value)
  if (proto) {
    const field = proto.join('.')
    throw new ServiceError('invalid', `${field}: "__proto__" is not a name this API takes`, field)
  }
  return value
}
