// A request's JSON body, read the one way every route that takes one reads it (/v1 and /mcp).
import { ServiceError } from '../types.js'

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * A JSON request body: UTF-8 (RFC 8259 allows nothing else), then JSON. A byte that is not UTF-8 is the
 * body's fault, said as such: decoded leniently it became U+FFFD, and a run then ran a command nobody sent.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new ServiceError('invalid', 'body: is not valid UTF-8', 'body')
  }
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ServiceError('invalid', `malformed JSON: ${(error as Error).message}`)
  }
}
