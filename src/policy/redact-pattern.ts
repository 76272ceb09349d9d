// A RegExp given to `redact`, compiled for re2js (a JavaScript port of RE2): matching takes time linear in
// the text, whatever the pattern, which V8's backtracking engine cannot promise (`/(a+)+$/` on output the
// sandbox chooses). What RE2 cannot run in linear time (backreferences, look-arounds) is refused here.
import { createRequire } from 'node:module'
import type { RE2JS } from 're2js'

type Engine = typeof import('re2js')
let engine: Engine | undefined
/**
 * re2js, loaded on the first RegExp a policy gives: it is ~1 MB of JavaScript that most runs (and every
 * start of the CLI) would otherwise compile for nothing.
 */
const re2 = (): Engine => {
  engine ??= createRequire(import.meta.url)('re2js') as Engine
  return engine
}

/** Flags that change what a pattern matches and have an RE2 equivalent; `u` is RE2's own behaviour. */
function flagBits(flag: string): number | undefined {
  const { RE2JS: E } = re2()
  const bits: Readonly<Record<string, number>> = {
    i: E.CASE_INSENSITIVE,
    m: E.MULTILINE,
    s: E.DOTALL,
    u: 0,
    // Every match is wanted anyway (g); where the search starts is cordon's business (y); indices (d) are
    // not returned.
    g: 0,
    y: 0,
    d: 0,
  }
  return bits[flag]
}

/**
 * The first construct of `source` that no linear-time engine can run, if any: a backreference (`\1`,
 * `\k<name>`) or a look-around (`(?=`, `(?!`, `(?<=`, `(?<!`). Character classes are skipped: `[\1]` and
 * `[(?=]` are plain characters there.
 */
export function nonLinearConstruct(source: string): string | null {
  let inClass = false
  for (let i = 0; i < source.length; i++) {
    const c = source[i]
    if (c === '\\') {
      const next = source[i + 1] ?? ''
      if (!inClass && /[1-9]/.test(next)) return `the backreference \\${next}`
      if (!inClass && next === 'k' && source[i + 2] === '<') return 'the backreference \\k<…>'
      i++
    } else if (inClass) {
      if (c === ']') inClass = false
    } else if (c === '[') {
      inClass = true
    } else if (c === '(' && source[i + 1] === '?') {
      const rest = source.slice(i + 2, i + 4)
      if (rest.startsWith('=') || rest.startsWith('!')) return `the look-ahead (?${rest[0]}`
      if (rest === '<=' || rest === '<!') return `the look-behind (?${rest}`
    }
  }
  return null
}

/** `re` as an RE2 pattern; throws an Error saying why when it cannot be (the caller names the field). */
export function compileRedactPattern(re: RegExp): RE2JS {
  const construct = nonLinearConstruct(re.source)
  if (construct) {
    throw new Error(
      `${re} cannot be matched in linear time: ${construct} needs a backtracking engine (rewrite it without backreferences or look-arounds)`,
    )
  }
  let flags = 0
  for (const flag of re.flags) {
    const bits = flagBits(flag)
    if (bits === undefined) throw new Error(`${re}: the flag ${flag} is not supported`)
    flags |= bits
  }
  try {
    const { RE2JS: E } = re2()
    return E.compile(E.translateRegExp(re.source), flags)
  } catch (error) {
    throw new Error(`${re} is not a pattern RE2 can run: ${(error as Error).message}`)
  }
}
