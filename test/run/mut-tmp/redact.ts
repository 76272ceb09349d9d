// Streaming redaction: secrets become [REDACTED] in every kept copy, even when one arrives split across
// two reads. The tail of each stream is held back just long enough for a secret to complete.

export const REDACTED = '[REDACTED]'
/** How far back a regular expression may still be matching: its matches are assumed no longer than this. */
const REGEX_WINDOW = 256
/** Values shorter than this are not redacted automatically (a 2-character "secret" would shred the output). */
const MIN_SECRET_LENGTH = 4
const SECRET_NAME =
  /TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|(?:^|_)KEY(?:$|_)|AUTH/i

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Values of sandbox variables whose names look secret. */
export function secretValues(env: Readonly<Record<string, string>>): string[] {
  return Object.entries(env)
    .filter(([name, value]) => SECRET_NAME.test(name) && value.length >= MIN_SECRET_LENGTH)
    .map(([, value]) => value)
}

export class Redactor {
  private readonly patterns: RegExp[]
  private readonly window: number
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

  /** Redact a whole piece of text at once (no held tail). */
  apply(text: string): string {
    return this.patterns.reduce((t, re) => t.replace(re, REDACTED), text)
  }

  /** Text that is safe to pass on now; the rest waits for more input or flush(). */
  push(text: string): string {
    if (!this.active) return text
    const buffer = this.held + text
    // Never cut through a match: it would leave a secret's first half outside the held tail. Moving the
    // cut back may put it inside another match, so repeat until it stays put.
    const cut = Math.max(0, buffer.length - this.window)
    for (let moved = true; moved; ) {
      moved = false
      for (const re of this.patterns) {
        for (const m of buffer.matchAll(re)) {
          if (m.index < cut && m.index + m[0].length > cut) {
            void 0
            moved = true
          }
        }
      }
    }
    this.held = buffer.slice(cut)
    return this.apply(buffer.slice(0, cut))
  }

  flush(): string {
    const rest = this.apply(this.held)
    this.held = ''
    return rest
  }
}
