// The log channel: JSON lines a sandboxed program writes to the fd named in CORDON_LOG_FD. Kept within
// their own byte budget; a line that is not a JSON object with a known level arrives as raw text at info.
// The budget bounds the bytes read and the entries kept, each as its JSON line: a line of one byte makes
// an entry of 27, a control character is 6 bytes of JSON, and counted as bytes read only, 16 MiB of
// "\x01\n" was 8M entries (268 MB as JSON, 1.3 GB of the host's heap).
import { StringDecoder } from 'node:string_decoder'
import type { LogEntry } from '../policy/schema.js'
import { Redaction, Redactor } from './redact.js'

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error'])
/** A line longer than this is cut and delivered as raw text, so a missing newline cannot hold memory. */
const MAX_LINE = 64 * 1024

/** A log line as an entry; `redact` applies to its text: to the decoded keys and string values of a JSON
 * line, at every depth (so an escaped secret is caught and the JSON stays valid), or (`redactRaw`, the same
 * unless the line was cut) to the raw line. */
export function parseLogLine(
  line: string,
  redact: (text: string) => string = (t) => t,
  redactRaw: (text: string) => string = redact,
): LogEntry {
  try {
    const value: unknown = JSON.parse(line)
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const { level, msg, ...rest } = redactValues(value, redact) as Record<string, unknown>
      if (typeof level === 'string' && LEVELS.has(level)) {
        const text =
          typeof msg === 'string' ? msg : msg === undefined || msg === null ? '' : JSON.stringify(msg)
        return { ...rest, level: level as LogEntry['level'], msg: text }
      }
    }
  } catch {
    // not JSON: raw text below
  }
  return { level: 'info', msg: redactRaw(line) }
}

function redactValues(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === 'string') return redact(value)
  if (Array.isArray(value)) return value.map((v) => redactValues(v, redact))
  if (value && typeof value === 'object') {
    // Keys too: a program may log a secret as a field name. Two keys hidden alike become one.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k), redactValues(v, redact)]))
  }
  return value
}

export class LogCollector {
  readonly entries: LogEntry[] = []
  /** Bytes read from the channel. */
  bytes = 0
  /** Bytes of the entries kept, each as its JSON line. */
  keptBytes = 0
  truncated = false
  private partial = ''
  private readonly decoder = new StringDecoder('utf8')
  private readonly redaction: Redaction
  /** An over-long line is passed on in pieces through its own streaming redactor, so no secret splits. */
  private longLine: Redactor | null = null

  constructor(
    private readonly budget: number,
    redact: readonly (string | RegExp)[] | Redaction,
    private readonly onLog?: (entry: LogEntry) => void,
  ) {
    this.redaction = redact instanceof Redaction ? redact : new Redaction(redact)
  }

  push(data: Buffer): void {
    if (this.truncated) return
    const room = this.budget - this.bytes
    const kept = data.length > room ? data.subarray(0, room) : data
    if (data.length > room) this.truncated = true
    this.bytes += kept.length
    const lines = (this.partial + this.decoder.write(kept)).split('\n')
    this.partial = lines.pop() ?? ''
    for (const line of lines) this.line(line)
    if (this.partial.length > MAX_LINE) {
      this.longLine ??= new Redactor(this.redaction)
      this.raw(this.longLine.push(this.partial))
      this.partial = ''
    }
  }

  finish(): LogEntry[] {
    // A character the budget split ends the line as U+FFFD, after the redaction of what precedes it.
    const split = this.decoder.end()
    const rest = this.partial
    this.partial = ''
    // The budget cut the last line (not its writer): a secret's beginning at its end is hidden too.
    if (this.truncated) this.line(rest, split)
    else if (rest || split || this.longLine) this.line(rest + split)
    return this.entries
  }

  private raw(text: string): void {
    if (text.trim()) this.add({ level: 'info', msg: text })
  }

  /** A whole line; or, with `cutBefore` (what follows the cut: '' or U+FFFD), the part the budget kept. */
  private line(raw: string, cutBefore?: string): void {
    const cut = cutBefore !== undefined
    if (this.longLine) {
      this.raw(this.longLine.push(raw) + this.longLine.flush(cut) + (cutBefore ?? ''))
      this.longLine = null
      return
    }
    if (!(raw + (cutBefore ?? '')).trim()) return
    const redact = (text: string) => this.redaction.apply(text)
    if (!cut) return void this.add(parseLogLine(raw, redact))
    // A line that still parses was whole; one that does not is raw text, whose end may be a secret's start.
    const rawCut = (text: string) => this.redaction.apply(text, true)
    if (cutBefore) return void this.add({ level: 'info', msg: rawCut(raw) + cutBefore })
    this.add(parseLogLine(raw, redact, rawCut))
  }

  private add(entry: LogEntry): void {
    if (this.keptBytes < 0) return
    const cost = Buffer.byteLength(JSON.stringify(entry)) + 1
    if (this.keptBytes + cost > this.budget) {
      // Full: nothing more is read or kept.
      this.truncated = true
      this.keptBytes = -1
      return
    }
    this.keptBytes += cost
    this.entries.push(entry)
    this.onLog?.(entry)
  }
}
