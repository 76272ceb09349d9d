// The log channel: JSON lines a sandboxed program writes to the fd named in CORDON_LOG_FD. Kept within
// their own byte budget; a line that is not a JSON object with a known level arrives as raw text at info.
import { StringDecoder } from 'node:string_decoder'
import type { LogEntry } from '../policy/schema.js'
import { Redactor } from './redact.js'

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error'])
/** A line longer than this is cut and delivered as raw text, so a missing newline cannot hold memory. */
const MAX_LINE = 64 * 1024

export function parseLogLine(line: string): LogEntry {
  try {
    const value: unknown = JSON.parse(line)
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const { level, msg, ...rest } = value as Record<string, unknown>
      if (typeof level === 'string' && LEVELS.has(level)) {
        return {
          ...rest,
          level: level as LogEntry['level'],
          msg: typeof msg === 'string' ? msg : JSON.stringify(msg ?? ''),
        }
      }
    }
  } catch {
    // not JSON: raw text below
  }
  return { level: 'info', msg: line }
}

export class LogCollector {
  readonly entries: LogEntry[] = []
  bytes = 0
  truncated = false
  private partial = ''
  private readonly decoder = new StringDecoder('utf8')
  private readonly redactor: Redactor

  constructor(
    private readonly budget: number,
    redact: readonly (string | RegExp)[],
    private readonly onLog?: (entry: LogEntry) => void,
  ) {
    this.redactor = new Redactor(redact)
  }

  push(data: Buffer): void {
    if (this.truncated) return
    const room = this.budget - this.bytes
    const kept = data.length > room ? data.subarray(0, room) : data
    if (data.length > room) this.truncated = true
    this.bytes += kept.length
    const lines = (this.partial + this.decoder.write(kept)).split('\n')
    this.partial = lines.pop() ?? ''
    if (this.partial.length > MAX_LINE) {
      lines.push(this.partial)
      this.partial = ''
    }
    for (const line of lines) this.line(line)
  }

  finish(): LogEntry[] {
    const rest = this.partial + this.decoder.end()
    this.partial = ''
    if (rest) this.line(rest)
    return this.entries
  }

  private line(raw: string): void {
    if (!raw.trim()) return
    // Each line is whole here, so a secret inside it cannot be split.
    const entry = parseLogLine(this.redactor.apply(raw))
    this.entries.push(entry)
    this.onLog?.(entry)
  }
}
