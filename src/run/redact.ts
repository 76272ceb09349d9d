// Streaming redaction: secrets become [REDACTED] in every kept copy, even when one arrives split across
// two reads. The tail of each stream is held back just long enough for a secret to complete.

export const REDACTED = '[REDACTED]'
/** How far back a regular expression may still be matching: its matches are assumed no longer than this. */
const REGEX_WINDOW = 256
/** Values shorter than this are not redacted automatically (a 2-character "secret" would shred the output). */
const MIN_SECRET_LENGTH = 4
const SECRET_NAME =
  /TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|(?:^|_)KEY(?:$|_)|(?:^|_)AUTH(?:$|_|ORIZATION)/i

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Values of sandbox variables whose names look secret. */
export function secretValues(env: Readonly<Record<string, string>>): string[] {
  return Object.entries(env)
    .filter(([name, value]) => SECRET_NAME.test(name) && value.length >= MIN_SECRET_LENGTH)
    .map(([, value]) => value)
}

interface Span {
  start: number
  end: number
}

export class Redactor {
  private readonly patterns: RegExp[]
  private readonly window: number
  /** Text already passed on, kept (raw) so look-behinds and secrets that began there still match. */
  private context = ''
  /** Text not yet passed on. */
  private held = ''

  constructor(redact: readonly (string | RegExp)[]) {
    const literals = [...new Set(redact.filter((r): r is string => typeof r === 'string' && r.length > 0))]
    const regexes = redact.filter((r): r is RegExp => r instanceof RegExp)
    // Longest first, so a secret that contains another is replaced whole.
    literals.sort((a, b) => b.length - a.length)
    this.patterns = [
      ...(literals.length ? [new RegExp(literals.map(escapeRegExp).join('|'), 'g')] : []),
      ...regexes.map((r) => new RegExp(r.source, r.flags.includes('g') ? r.flags : `${r.flags}g`)),
    ]
    const longest = Math.max(0, ...literals.map((l) => l.length))
    this.window = Math.max(longest - 1, regexes.length ? REGEX_WINDOW : 0)
  }

  get active(): boolean {
    return this.patterns.length > 0
  }

  /**
   * Every match of every pattern starting at or after `from` (the text before it is context for
   * look-behinds only), merged where they overlap; adjacent ones stay two. Scanning resumes exactly where
   * the previous push stopped, so a stream is cut into the same matches as the whole text would be.
   */
  private spans(text: string, from = 0): Span[] {
    const found: Span[] = []
    for (const re of this.patterns) {
      re.lastIndex = from
      for (let m = re.exec(text); m; m = re.exec(text)) {
        if (m[0].length === 0) {
          re.lastIndex++
          continue
        }
        found.push({ start: m.index, end: m.index + m[0].length })
      }
    }
    found.sort((a, b) => a.start - b.start)
    const merged: Span[] = []
    for (const span of found) {
      const last = merged.at(-1)
      if (last && span.start < last.end) last.end = Math.max(last.end, span.end)
      else merged.push({ ...span })
    }
    return merged
  }

  /** text[from, to) with every span inside replaced (spans are clipped to the range). */
  private render(text: string, spans: Span[], from: number, to: number): string {
    let out = ''
    let at = from
    for (const span of spans) {
      if (span.end <= from || span.start >= to) continue
      out += text.slice(at, Math.max(at, span.start)) + REDACTED
      at = Math.min(to, span.end)
    }
    return out + text.slice(at, to)
  }

  /** Redact a whole piece of text at once (no held tail). */
  apply(text: string): string {
    return this.active ? this.render(text, this.spans(text), 0, text.length) : text
  }

  /** Text that is safe to pass on now; the rest waits for more input or flush(). */
  push(text: string): string {
    if (!this.active) return text
    const buffer = this.context + this.held + text
    const base = this.context.length
    const spans = this.spans(buffer, base)
    // Hold back a window a secret could still be completing in, never cut through a match (moving the
    // cut back can land in an earlier one, hence the loop), and never between a surrogate pair.
    let cut = Math.max(base, buffer.length - this.window)
    for (let moved = true; moved; ) {
      moved = false
      for (const span of spans) {
        if (span.start < cut && span.end > cut) {
          cut = Math.max(base, span.start)
          moved = span.start >= base
        }
      }
    }
    const code = buffer.charCodeAt(cut - 1)
    if (cut > base && code >= 0xd800 && code <= 0xdbff) cut--
    const out = this.render(buffer, spans, base, cut)
    this.context = buffer.slice(Math.max(0, cut - this.window), cut)
    this.held = buffer.slice(cut)
    return out
  }

  flush(): string {
    const buffer = this.context + this.held
    const base = this.context.length
    const out = this.active ? this.render(buffer, this.spans(buffer, base), base, buffer.length) : buffer
    this.context = ''
    this.held = ''
    return out
  }
}
