// Redaction: secrets become [REDACTED] in everything cordon returns, prints or keeps, in time linear in
// the text whatever the patterns, holding back at most a window of a stream to catch a secret that
// arrives split across writes.
//
// Literal secrets go through one Aho–Corasick automaton (every occurrence of every literal, one step per
// character: V8's alternation and indexOf are O(text × secret) on input made of a secret's prefixes, which a
// sandbox knows when the secret is its own environment variable). RegExps go through RE2 (re2js), and a
// match is assumed at most REGEX_WINDOW characters long: each engine call sees a bounded slice, and the
// scan never goes back, so no match can pull the cut back without bound or make a push rescan the tail.
//
// A match is a set of characters; what is shown is every character outside all matches, each run of masked
// characters as one [REDACTED] (see MarkerRuns for where a run's marker goes when two streams interleave).
import { PolicyError } from '../errors.js'
import { baseEnv, buildEnv } from '../policy/env.js'
import { compileRedactPattern } from '../policy/redact-pattern.js'
import type { RunResult } from '../policy/result.js'
import { type OutputData, type Policy, parsePolicy, type RunOptions } from '../policy/schema.js'

export const REDACTED = '[REDACTED]'
/** How far a regular expression may match: its matches are assumed no longer (a longer one is cut here). */
export const REGEX_WINDOW = 256
/** A RegExp's first look at new text: big enough that the window it overlaps the next one by is cheap. */
const PROBE_BLOCK = 4096
/** Values shorter than this are not redacted automatically (a 2-character "secret" would shred the output). */
const MIN_SECRET_LENGTH = 4
/**
 * Names that look secret. Besides the obvious: short password names (DB_PASS, MYSQL_PWD; never PWD, the
 * cwd), URLs and DSNs that carry credentials (DATABASE_URL, SENTRY_DSN, connection strings), cookies.
 */
export const SECRET_NAME =
  /TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|(?:^|_)KEY(?:$|_)|(?:^|_)AUTH(?:$|_|ORIZATION)|(?:^|_)PASS(?:$|_)|_PWD$|DATABASE_URL|(?:^|_)DSN$|CONN(?:ECTION)?_?STR(?:ING)?|COOKIE/i
/** ASCII transitions of the automaton are a dense table while it has at most this many states (4 MiB). */
const MAX_TABLE_STATES = 8192

/**
 * The names every sandbox has (baseEnv), none of which looks secret (test/run/redact.test.ts holds it): a
 * run that adds no other never runs SECRET_NAME, whose compiling is ~0.3 ms of a CLI start.
 */
const BASE_NAMES = new Set(Object.keys(baseEnv()))

/** Whether a variable's name looks secret. */
export function secretName(name: string): boolean {
  return !BASE_NAMES.has(name) && SECRET_NAME.test(name)
}

/** Values of sandbox variables whose names look secret. */
export function secretValues(env: Readonly<Record<string, string>>): string[] {
  return Object.entries(env)
    .filter(([name, value]) => value.length >= MIN_SECRET_LENGTH && secretName(name))
    .map(([, value]) => value)
}

/**
 * What a run redacts: the policy's list and the values of the variables it passes whose names look
 * secret. Built from the policy alone, so a run refused before its plan exists is redacted the same way.
 */
export function redactionFor(policy: Pick<Policy, 'redact' | 'env' | 'passEnv'>): Redaction {
  return new Redaction([...policy.redact, ...secretValues(buildEnv(process.env, policy.passEnv, policy.env))])
}

/**
 * A result's own small fields with every secret hidden: the violation (its message quotes programs,
 * paths, hosts) and the network events. Output and logs are redacted as they arrive; this is the rest, so
 * every result goes through it where it is built.
 */
export function redactResult<T extends RunResult<OutputData>>(result: T, redaction: Redaction): T {
  if (!redaction.active) return result
  const hide = (text: string) => redaction.apply(text)
  // A reason names a host as the proxy read it, lower-cased (`read as ...`): a secret with capitals is
  // looked for that way too. The host itself was redacted as received, before it was escaped (showEvents).
  const hideHost = (text: string) => redaction.forHosts().apply(text)
  const { violation } = result
  return {
    ...result,
    violation: violation && {
      ...violation,
      message: hide(violation.message),
      limit: typeof violation.limit === 'string' ? hide(violation.limit) : violation.limit,
    },
    network: result.network.map((event) => ({
      ...event,
      host: hideHost(event.host),
      reason: hideHost(event.reason),
    })),
  }
}

/**
 * For options that did not parse: what they would redact, as far as it can be read from them. Option
 * errors quote the value at fault (JSON-escaped), which may be a secret, so the escaped form counts too.
 */
export function redactionForInput(options: unknown): Redaction {
  const o = (options && typeof options === 'object' ? options : {}) as Record<string, unknown>
  const strings = (v: unknown) =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && !!x) : []
  const env = Object.fromEntries(
    Object.entries(o.env && typeof o.env === 'object' ? o.env : {}).filter(([, v]) => typeof v === 'string'),
  ) as Record<string, string>
  const literals = [...strings(o.redact), ...secretValues(buildEnv(process.env, strings(o.passEnv), env))]
  const regexes = (Array.isArray(o.redact) ? o.redact : []).filter((r): r is RegExp => {
    if (!(r instanceof RegExp)) return false
    try {
      compileRedactPattern(r)
      return true
    } catch {
      return false
    }
  })
  return new Redaction([...literals, ...literals.map((l) => JSON.stringify(l).slice(1, -1)), ...regexes])
}

/** A PolicyError quoting a secret (a path, a program, an option's value), with the secret hidden. */
export function redactThrown(error: unknown, redaction: Redaction): unknown {
  if (!(error instanceof PolicyError) || !redaction.active) return error
  const reason = redaction.apply(error.reason)
  return reason === error.reason ? error : new PolicyError(redaction.apply(error.field), reason)
}

type Mark = (start: number, end: number) => void

/** Aho–Corasick over UTF-16 code units: reports, for each position, the longest literal ending there. */
class Literals {
  readonly longest: number
  private readonly goto: Map<number, number>[] = [new Map()]
  private readonly fail: Int32Array
  /** Length of the longest literal that is a suffix of the state's text (0: none). */
  private readonly hit: Int32Array
  /** Every ASCII transition, failures resolved (null when the automaton is too big for it). */
  private readonly table: Int32Array | null
  /**
   * Each state's depth in the trie: how long the text's longest suffix that begins some literal is, after
   * a scan ends in that state.
   */
  readonly depth: number[]

  constructor(literals: readonly string[]) {
    const depth = [0]
    this.depth = depth
    const own = [0]
    for (const literal of literals) {
      let state = 0
      for (let i = 0; i < literal.length; i++) {
        const c = literal.charCodeAt(i)
        let next = this.goto[state]!.get(c)
        if (next === undefined) {
          next = this.goto.length
          this.goto.push(new Map())
          depth.push(depth[state]! + 1)
          own.push(0)
          this.goto[state]!.set(c, next)
        }
        state = next
      }
      own[state] = literal.length
    }
    this.longest = Math.max(0, ...literals.map((l) => l.length))
    const states = this.goto.length
    this.fail = new Int32Array(states)
    this.hit = new Int32Array(states)
    this.table = states <= MAX_TABLE_STATES ? new Int32Array(states * 128) : null
    // Breadth first, so a state's failure (shallower) is complete before the state.
    const order = [0]
    for (let k = 0; k < order.length; k++) {
      const state = order[k]!
      this.hit[state] = Math.max(own[state]!, state === 0 ? 0 : this.hit[this.fail[state]!]!)
      if (this.table) {
        for (let c = 0; c < 128; c++) {
          const next = this.goto[state]!.get(c)
          this.table[state * 128 + c] = next ?? (state === 0 ? 0 : this.table[this.fail[state]! * 128 + c]!)
        }
      }
      for (const [c, next] of this.goto[state]!) {
        this.fail[next] = state === 0 ? 0 : this.step(this.fail[state]!, c)
        order.push(next)
      }
    }
  }

  /** The transition on code unit c: one lookup for ASCII; otherwise failure links, amortised O(1). */
  step(state: number, c: number): number {
    if (c < 128 && this.table) return this.table[state * 128 + c]!
    for (let s = state; ; s = this.fail[s]!) {
      const next = this.goto[s]!.get(c)
      if (next !== undefined) return next
      if (s === 0) return 0
    }
  }

  /** Scan text[from, to) (absolute position `at` of text[0]) from `state`; returns the state after it. */
  scan(state: number, text: string, from: number, to: number, at: number, mark: Mark): number {
    const { table, hit } = this
    let s = state
    for (let i = from; i < to; i++) {
      const c = text.charCodeAt(i)
      s = c < 128 && table ? table[s * 128 + c]! : this.step(s, c)
      const length = hit[s]!
      if (length) mark(at + i + 1 - length, at + i + 1)
    }
    return s
  }
}

/**
 * The compiled redaction of one run: what to hide, and how much of it each engine was asked to scan
 * (`scanned`, in characters: what tests hold to a multiple of the input, so linear time is checked
 * without timing anything). Throws PolicyError for a RegExp no linear-time engine can run.
 */
export class Redaction {
  readonly literals: Literals | null
  readonly regexes: { re2: ReturnType<ReturnType<typeof compileRedactPattern>['re2']> }[]
  /** Characters that may still complete a match: held back by a streaming scan. */
  readonly window: number
  scanned = 0
  private readonly literalList: string[]
  private readonly regexList: RegExp[]
  private bytes: Redaction | undefined
  private hosts: Redaction | undefined
  private rawHosts: Redaction | undefined

  constructor(redact: readonly (string | RegExp)[]) {
    const literals = [...new Set(redact.filter((r): r is string => typeof r === 'string' && r.length > 0))]
    this.literalList = literals
    this.regexList = redact.filter((r): r is RegExp => r instanceof RegExp)
    this.literals = literals.length ? new Literals(literals) : null
    this.regexes = redact.flatMap((r, i) => {
      if (!(r instanceof RegExp)) return []
      try {
        return [{ re2: compileRedactPattern(r).re2() }]
      } catch (error) {
        throw new PolicyError(`redact.${i}`, (error as Error).message)
      }
    })
    this.window = Math.max(
      this.literals ? this.literals.longest - 1 : 0,
      this.regexes.length ? REGEX_WINDOW : 0,
    )
  }

  get active(): boolean {
    return this.literals !== null || this.regexes.length > 0
  }

  scanner(): Scanner {
    return new Scanner(this)
  }

  /** The masked intervals of `text`, in order, merged. */
  masks(text: string): [number, number][] {
    if (!this.active || !text) return []
    const scanner = this.scanner()
    scanner.push(text)
    scanner.end()
    const out: [number, number][] = []
    let at = 0
    for (const [piece, masked] of scanner.release(scanner.decided)) {
      if (masked) out.push([at, at + piece.length])
      at += piece.length
    }
    return out
  }

  /**
   * The same secrets for bytes read as Latin-1 (one character a byte): literals as their UTF-8 bytes,
   * RegExps as they are (so they match ASCII text in bytes).
   */
  forBytes(): Redaction {
    this.bytes ??= new Redaction([
      ...this.literalList.map((l) => Buffer.from(l, 'utf8').toString('latin1')),
      ...this.regexList,
    ])
    return this.bytes
  }

  /** The same secrets, each literal also lower-cased: for host names, which the proxy lower-cases. */
  forHosts(): Redaction {
    this.hosts ??= new Redaction([
      ...this.literalList,
      ...this.literalList.map((l) => l.toLowerCase()),
      ...this.regexList,
    ])
    return this.hosts
  }

  /**
   * For a host as a sandbox sent it, read as Latin-1 (one character a byte): each literal as it is, lower-cased,
   * and as its UTF-8 bytes, so a secret is found in the bytes before they are escaped for showing.
   */
  forRawHosts(): Redaction {
    this.rawHosts ??= new Redaction([
      ...this.forHosts().literalList,
      ...this.forHosts().literalList.map((l) => Buffer.from(l, 'utf8').toString('latin1')),
      ...this.regexList,
    ])
    return this.rawHosts
  }

  /** Overwrite every secret in `bytes` (as UTF-8 or ASCII) with `*`, keeping the length. */
  maskBytes(bytes: Uint8Array): void {
    if (!this.active || bytes.length === 0) return
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1')
    for (const [start, end] of this.forBytes().masks(text)) bytes.fill(0x2a, start, end)
  }

  /**
   * `text` with every match shown as [REDACTED]. `cut`: the text is the first part of a longer one (a cap
   * cut it), so a secret's beginning at its end is hidden too (see Scanner.cut).
   */
  apply(text: string, cut = false): string {
    if (!this.active || !text) return text
    const scanner = this.scanner()
    scanner.push(text)
    if (cut) scanner.cut()
    scanner.end()
    const runs = new MarkerRuns()
    let out = ''
    for (const [piece, masked] of scanner.release(scanner.decided)) out += runs.render(piece, masked)
    return out + runs.close()
  }
}

/** One RegExp's place in a stream: every match starting before `q` is known. */
class RegexScan {
  q = 0
  /** `probe`: look at a whole block for any match first (the DFA, fast); `find`: matches are near. */
  private probing = true

  constructor(
    private readonly redaction: Redaction,
    private readonly re2: Redaction['regexes'][number]['re2'],
  ) {}

  /** text holds the stream from absolute position `base`; it ends at `end` (the real end when `final`). */
  run(text: string, base: number, end: number, final: boolean, mark: Mark): void {
    const W = REGEX_WINDOW
    for (;;) {
      const left = end - this.q
      // A position is decided once every match that can start before it is inside the text: a window
      // after it. Each step waits for two windows, so it decides at least one: waiting for less, every
      // small push would scan the same window again.
      if (left <= 0 || (!final && left < 2 * W)) return
      if (this.probing) {
        const to = Math.min(end, this.q + PROBE_BLOCK)
        const accept = final && to === end ? end : to - W
        // The DFA says whether there is a match; only then does a slower engine say where it starts.
        const first = this.search(text, base, this.q, to, 0) && this.search(text, base, this.q, to, 1)
        if (!first || first[0] >= accept) {
          this.q = accept
          continue
        }
        this.q = first[0]
        this.probing = false
      }
      // A slice of two windows: matches starting in its first half are complete in it.
      const to = Math.min(end, this.q + 2 * W)
      const accept = final && to === end ? end : to - W
      const m = this.search(text, base, this.q, to, 1)
      if (!m || m[0] >= accept) {
        this.q = accept
        this.probing = true
        continue
      }
      const [start, stop] = m
      // Longer than the window: cut there (what is inside is hidden) and go on scanning from the cut.
      const cut = Math.min(stop, start + W)
      if (cut > start) mark(start, cut)
      this.q = Math.max(cut, start + 1)
    }
  }

  /**
   * The leftmost-first match in text[from, to) (absolute), or with `groups` 0 whether there is one (the DFA
   * alone answers that) as a match at `from`. The engine gets a copy of exactly that slice, plus the
   * character before it so `^` and `\b` see what precedes: handed the whole buffer, re2js would scan (indexOf)
   * or clear (its backtracker's bitmap) up to the buffer's end on every call.
   */
  private search(
    text: string,
    base: number,
    from: number,
    to: number,
    groups: 0 | 1,
  ): [number, number] | null {
    const before = from > 0 ? 1 : 0
    const slice = text.slice(from - before - base, to - base)
    this.redaction.scanned += to - from
    const [found, at] = this.re2.matchWithGroup(slice, before, slice.length, 0, groups) as [
      boolean,
      number[] | null,
    ]
    if (!found) return null
    if (groups === 0 || !at) return [from, from]
    return [from - before + at[0]!, from - before + at[1]!]
  }
}

/**
 * A streaming scan of one sequence of text: push text, read which of it is decided (no later input can
 * change whether it is masked), release it as runs of masked and clear characters. Holds back less than
 * the longest literal, and with a RegExp less than two of its windows (a surrogate pair is never cut).
 */
export class Scanner {
  /** Absolute position of text[0]. */
  private base = 0
  private text = ''
  private literalState = 0
  private readonly regexes: RegexScan[]
  /** Masked intervals not yet released, absolute, unsorted. */
  private marks: number[] = []
  private ended = false
  /** Everything before this is released. */
  private released = 0

  constructor(private readonly redaction: Redaction) {
    this.regexes = redaction.regexes.map((r) => new RegexScan(redaction, r.re2))
  }

  /** Positions before this are decided. */
  get decided(): number {
    let decided = this.length
    if (this.redaction.literals && !this.ended) {
      decided = Math.min(decided, this.length - (this.redaction.literals.longest - 1))
    }
    for (const r of this.regexes) decided = Math.min(decided, r.q)
    // Never between the halves of a surrogate pair, so every released piece is whole text.
    const code = this.text.charCodeAt(decided - 1 - this.base)
    if (!this.ended && decided > this.released && code >= 0xd800 && code <= 0xdbff) decided--
    return Math.max(this.released, decided)
  }

  /** Absolute length of everything pushed. */
  get length(): number {
    return this.base + this.text.length
  }

  /** Mask [start, end) as well (a match found elsewhere, e.g. in another view of the same characters). */
  mask(start: number, end: number): void {
    if (end > start) this.marks.push(start, end)
  }

  push(text: string): void {
    if (!text) return
    const at = this.text.length
    this.text += text
    this.scan(at)
  }

  /**
   * The text was cut here (by a cap), not ended by its writer: its tail that begins a literal is part of a
   * secret whose rest was left out, so it is masked too. A RegExp's match cut short may no longer match,
   * and which tail could begin one cannot be told: with RegExps the last REGEX_WINDOW characters are
   * masked (their matches are assumed no longer). Call before end().
   */
  cut(): void {
    if (this.ended) return
    const { literals } = this.redaction
    let from = this.length - (literals ? (literals.depth[this.literalState] ?? 0) : 0)
    if (this.regexes.length > 0) from = Math.min(from, this.length - REGEX_WINDOW)
    this.mask(Math.max(this.released, from), this.length)
  }

  /** No more text: what was held back is decided. */
  end(): void {
    this.ended = true
    this.scan(this.text.length)
  }

  private scan(from: number): void {
    const marks = this.marks
    // Hits come in rising order of their ends: extend the last interval when they overlap it.
    const mark: Mark = (s, e) => {
      const n = marks.length
      if (n > 0 && s >= marks[n - 2]! && s <= marks[n - 1]!) marks[n - 1] = Math.max(marks[n - 1]!, e)
      else marks.push(s, e)
    }
    const { literals } = this.redaction
    if (literals) {
      this.redaction.scanned += this.text.length - from
      this.literalState = literals.scan(this.literalState, this.text, from, this.text.length, this.base, mark)
    }
    for (const r of this.regexes) r.run(this.text, this.base, this.length, this.ended, mark)
  }

  /**
   * Hand out text[released, upTo) as alternating runs of [text, masked], and forget it (keeping one character
   * of context for the RegExps).
   */
  release(upTo: number): [string, boolean][] {
    const from = this.released
    if (upTo <= from) return []
    const runs: [string, boolean][] = []
    const piece = (s: number, e: number, masked: boolean) => {
      if (e > s) runs.push([this.text.slice(s - this.base, e - this.base), masked])
    }
    if (this.marks.length === 0) {
      piece(from, upTo, false)
    } else {
      // Merge the intervals in order of their starts; those reaching past upTo stay for the next release.
      // Literal hits come in that order already (only a RegExp's or mask() may not): sorting a pair
      // array a hit was ~1 µs a hit, 3 s for 4 MiB of text where every other character is a secret.
      const marks = sortedPairs(this.marks)
      let at = from
      const keep: number[] = []
      const emit = (s: number, e: number) => {
        if (e <= from) return
        if (s >= upTo) {
          keep.push(s, e)
          return
        }
        piece(at, Math.max(at, s), false)
        piece(Math.max(at, s), Math.min(e, upTo), true)
        at = Math.min(e, upTo)
        if (e > upTo) keep.push(upTo, e)
      }
      let start = marks[0]!
      let end = marks[1]!
      for (let i = 2; i < marks.length; i += 2) {
        const s = marks[i]!
        const e = marks[i + 1]!
        if (s <= end) end = Math.max(end, e)
        else {
          emit(start, end)
          start = s
          end = e
        }
      }
      emit(start, end)
      piece(at, upTo, false)
      this.marks = keep
    }
    this.released = upTo
    const keepFrom = Math.max(this.base, upTo - 1)
    if (keepFrom > this.base) {
      this.text = this.text.slice(keepFrom - this.base)
      this.base = keepFrom
    }
    return runs
  }
}

/** Intervals as flat [start, end] pairs, ordered by their starts (the same array when they are already). */
function sortedPairs(pairs: number[]): number[] {
  let sorted = true
  for (let i = 2; i < pairs.length && sorted; i += 2) sorted = pairs[i]! >= pairs[i - 2]!
  if (sorted) return pairs
  const order = Array.from({ length: pairs.length / 2 }, (_, i) => i).sort(
    (a, b) => pairs[2 * a]! - pairs[2 * b]!,
  )
  return order.flatMap((i) => [pairs[2 * i]!, pairs[2 * i + 1]!])
}

/**
 * Where [REDACTED] goes. A masked run's marker is written when the run ends: at the next clear character
 * of any stream, or at the end. So between two clear characters shown next to each other there is never a
 * hidden one of any stream without a marker, and a secret can appear whole in what is shown (one stream's
 * text, or both interleaved) only if it was whole, unmasked, in what was scanned. A run interrupted by the
 * other stream's text gets a second marker when it resumes.
 */
export class MarkerRuns<S extends string = string> {
  /** Streams with a masked run under way, in the order their runs began. */
  private open: S[] = []

  /** What to show for one run of one stream's characters (see `emit` for two streams). */
  render(text: string, masked: boolean, stream = '' as S): string {
    let out = ''
    this.emit(stream, text, masked, (_s, t) => {
      out += t
    })
    return out
  }

  /** Feed one run; `write` gets what each stream shows, in order. */
  emit(stream: S, text: string, masked: boolean, write: (stream: S, text: string) => void): void {
    if (!text) return
    if (masked) {
      if (!this.open.includes(stream)) this.open.push(stream)
      return
    }
    this.closeAll(write)
    write(stream, text)
  }

  closeAll(write: (stream: S, text: string) => void): void {
    for (const stream of this.open) write(stream, REDACTED)
    this.open = []
  }

  /** Close a single-stream run (render's counterpart). */
  close(): string {
    const out = this.open.length ? REDACTED : ''
    this.open = []
    return out
  }
}

/**
 * Streaming redaction of one sequence of text: push pieces, get back what is safe to pass on now; flush at
 * the end. The same text as `apply` on the whole, whatever the pieces (for matches within the window).
 */
export class Redactor {
  readonly redaction: Redaction
  private scanner: Scanner
  private runs = new MarkerRuns()

  constructor(redact: readonly (string | RegExp)[] | Redaction) {
    this.redaction = redact instanceof Redaction ? redact : new Redaction(redact)
    this.scanner = this.redaction.scanner()
  }

  get active(): boolean {
    return this.redaction.active
  }

  apply(text: string): string {
    return this.redaction.apply(text)
  }

  push(text: string): string {
    if (!this.active) return text
    this.scanner.push(text)
    return this.render(this.scanner.decided)
  }

  /** The end of the text; `cut`: a cap cut it there, so a secret's beginning at its end is hidden too. */
  flush(cut = false): string {
    if (!this.active) return ''
    if (cut) this.scanner.cut()
    this.scanner.end()
    const out = this.render(this.scanner.decided) + this.runs.close()
    this.scanner = this.redaction.scanner()
    return out
  }

  private render(upTo: number): string {
    let out = ''
    for (const [text, masked] of this.scanner.release(upTo)) out += this.runs.render(text, masked)
    return out
  }
}

/** A streaming redactor of bytes: push chunks as they come, end() once they are over. */
export interface ByteRedactor {
  /**
   * `chunk` with every secret as [REDACTED], as far as it is decided: what may still begin a secret (less
   * than the longest one, or a RegExp's window) is held back for the next push, so a secret cut across
   * chunks is found whole and what is held stays bounded.
   */
  push(chunk: Uint8Array): Buffer
  /** What was held back, redacted. */
  end(): Buffer
}

/** What a run redacts, for what a face keeps of it besides its result. */
export interface SecretRedactor {
  /** Whether there is anything to redact at all. */
  readonly active: boolean
  /** `text` with every secret as [REDACTED] (a file's name, say). */
  text(text: string): string
  /** A fresh streaming redactor of bytes (a file's contents), as the run's `encoding: 'buffer'` output is redacted. */
  bytes(): ByteRedactor
}

/**
 * What a run with these options redacts: its `redact` list, and the values of the variables of its
 * environment (`env`, `passEnv`) whose names look secret. For what a face keeps of a run besides its
 * result, such as the files its sandbox wrote, so that they are redacted exactly as its output. Throws
 * PolicyError for options that do not parse.
 */
export function redactorFor(options: Pick<RunOptions, 'redact' | 'env' | 'passEnv'> = {}): SecretRedactor {
  const { redact, env, passEnv } = options
  const policy = parsePolicy({
    ...(redact !== undefined ? { redact } : {}),
    ...(env !== undefined ? { env } : {}),
    ...(passEnv !== undefined ? { passEnv } : {}),
  })
  const redaction = redactionFor(policy)
  return {
    active: redaction.active,
    text: (text) => redaction.apply(text),
    bytes: () => {
      // Bytes as Latin-1 text (a character a byte), against the secrets as their UTF-8 bytes.
      const redactor = new Redactor(redaction.forBytes())
      return {
        push: (chunk) =>
          Buffer.from(
            redactor.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('latin1')),
            'latin1',
          ),
        end: () => Buffer.from(redactor.flush(), 'latin1'),
      }
    },
  }
}
