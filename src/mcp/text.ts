// What a program printed, made safe to put in front of a model (and of the terminal or page a client shows
// a tool result in). Two things: control characters are escaped, so no ESC sequence, BEL or bare CR of the
// program reaches a terminal or rewrites what a reader sees; and the program's text is framed by markers
// carrying a token drawn at random for each answer, which the program cannot know, so no text it prints
// passes for one of cordon's own markers (`[end …]`, `[cut …]`).
import { randomBytes } from 'node:crypto'

/**
 * C0 controls but tab and newline, DEL, and C1 controls; the bidirectional overrides and isolates (they
 * reorder what a reader sees: "Trojan Source"), and the line and paragraph separators (a line break to
 * some renderers, none to others).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const ESCAPED = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const ESCAPED_IN_LINE = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const SHORT: Record<string, string> = { '\r': '\\r', '\t': '\\t', '\n': '\\n' }

function spelled(ch: string): string {
  const short = SHORT[ch]
  if (short) return short
  const code = ch.charCodeAt(0)
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`
}

/**
 * `text` with its control characters spelt out (`\x1b`, `\r`, `\u202e`), tab and newline kept. With
 * `inLine`, tab and newline too: a value shown within one line (a command, a progress message).
 */
export function escapeText(text: string, { inLine = false } = {}): string {
  return text.replace(inLine ? ESCAPED_IN_LINE : ESCAPED, spelled)
}

/**
 * At most the bytes `bytes` take as JSON once decoded and escaped, counted without building either: a
 * control byte is `\\x01` (5 bytes in JSON), a quote, backslash, tab or newline 2, any other byte of
 * ASCII 1, and a byte past ASCII at most 3 (an invalid one becomes U+FFFD; a valid character is as long
 * as its bytes, or, a C1 control or a bidirectional one, at most 7 bytes for its 2 or 3).
 */
export function shownJsonBytes(bytes: Uint8Array): number {
  let n = 2
  for (const b of bytes) {
    if (b >= 0x80) n += 3
    else if (b === 0x22 || b === 0x5c || b === 0x09 || b === 0x0a) n += 2
    else if (b < 0x20 || b === 0x7f) n += 5
    else n += 1
  }
  return n
}

/** A fresh token for one answer's markers: 48 random bits, as 12 hex digits. */
export function newBoundary(): string {
  return randomBytes(6).toString('hex')
}

/**
 * `text` (escaped already) framed as program output: an opening line `[<what> <boundary><detail>]`, the
 * text, and a closing line `[end <boundary><after>]`.
 */
export function framed(
  what: string,
  boundary: string,
  text: string,
  { detail = '', after = '' }: { detail?: string; after?: string } = {},
): string {
  const body = text === '' || text.endsWith('\n') ? text : `${text}\n`
  return `[${what} ${boundary}${detail}]\n${body}[end ${boundary}${after}]`
}
