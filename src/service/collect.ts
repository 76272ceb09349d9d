// What a run leaves to keep: the workspace's files matching the request's `collect` globs, copied into the
// data dir's files/ after the sandbox is gone, redacted as the run's output is, within a byte cap that
// counts what is kept (after redaction) and what is read. What the sandbox left is untrusted: names,
// links, sizes and the number of entries are all its own, so nothing here is unbounded.
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  type Stats,
  unlinkSync,
  writeSync,
} from 'node:fs'
import path from 'node:path'
import type { SecretRedactor } from '../index.js'

/** One piece of a glob: a character, `?`, `*` (within a name), `**` (across names), `**` then `/` (any directories). */
type GlobToken = { kind: 'char'; c: string } | { kind: 'one' | 'star' | 'any' | 'dirs' }

function globTokens(glob: string): GlobToken[] {
  const tokens: GlobToken[] = []
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string
    if (c === '*' && glob[i + 1] === '*') {
      i++
      if (glob[i + 1] === '/') {
        i++
        tokens.push({ kind: 'dirs' })
      } else tokens.push({ kind: 'any' })
    } else if (c === '*') tokens.push({ kind: 'star' })
    else if (c === '?') tokens.push({ kind: 'one' })
    else tokens.push({ kind: 'char', c })
  }
  return tokens
}

/** Work shared by every match of one collect(): each state a match visits is a step. */
export interface GlobBudget {
  steps: number
}

/**
 * A simple glob (`*` and `?` within a name, `**` across directories, `**` then `/`: any directories or none) as a
 * test of a whole path. The glob is the client's and the path the sandbox's, so it is never a backtracking
 * RegExp (`*a*a*a…b` against a long name takes exponential time there, on the server's one thread): the
 * glob runs as an automaton over its positions, all of them at once, in time linear in the path (times
 * the glob's length at worst). Each state visited is taken from `budget`; once it is spent, nothing more
 * matches.
 */
export function globMatcher(glob: string, budget: GlobBudget = { steps: Number.POSITIVE_INFINITY }) {
  const tokens = globTokens(glob)
  const m = tokens.length
  // What each token is and matches, as numbers: the loop below runs for every name the sandbox made.
  const [CHAR, ONE, STAR, ANY] = [0, 1, 2, 3]
  const KIND = { char: CHAR, one: ONE, star: STAR, any: ANY, dirs: 4 } as const
  const kinds = new Uint8Array(m)
  const chars = new Array<string>(m)
  tokens.forEach((t, i) => {
    kinds[i] = KIND[t.kind]
    chars[i] = t.kind === 'char' ? t.c : ''
  })
  // States 0..m: about to match token i (m: the end); m+1+i: inside the `**` of a `**` then `/` at i.
  // `seen[s] === gen`: s is in the set being built. The generation goes on from one path to the next, and
  // the sets live in two buffers made once: a match costs what it visits, nothing as long as the glob.
  const states = 2 * m + 2
  const seen = new Int32Array(states).fill(-1)
  let gen = 0
  let current = new Int32Array(states)
  let next = new Int32Array(states)
  let size = 0
  /** Adds `state` to `next`, with the closure over what may match nothing (`*`, `**`, `**` then `/`). */
  const add = (state: number) => {
    for (let s = state; ; s++) {
      if (seen[s] === gen) return
      seen[s] = gen
      next[size++] = s
      budget.steps--
      if (s >= m || kinds[s] === CHAR || kinds[s] === ONE) return
    }
  }
  const keep = (s: number) => {
    if (seen[s] === gen) return
    seen[s] = gen
    next[size++] = s
  }
  return (text: string): boolean => {
    if (gen > 2 ** 30) {
      seen.fill(-1)
      gen = 0
    }
    // Each match is a step, whatever it visits: a name against many globs is work too.
    budget.steps--
    gen++
    size = 0
    add(0)
    let count = size
    ;[current, next] = [next, current]
    for (let i = 0; i < text.length; i++) {
      if (budget.steps <= 0 || count === 0) return false
      const c = text[i] as string
      gen++
      size = 0
      for (let j = 0; j < count; j++) {
        const s = current[j] as number
        budget.steps--
        if (s > m) {
          // Inside `**` then `/`: any character stays inside; a `/` may also end it.
          keep(s)
          if (c === '/') add(s - m)
          continue
        }
        if (s === m) continue
        const kind = kinds[s]
        if (kind === CHAR) {
          if (c === chars[s]) add(s + 1)
        } else if (kind === ONE) {
          if (c !== '/') add(s + 1)
        } else if (kind === STAR) {
          if (c !== '/') add(s)
        } else if (kind === ANY) add(s)
        else {
          keep(m + 1 + s)
          if (c === '/') add(s + 1)
        }
      }
      count = size
      ;[current, next] = [next, current]
    }
    if (budget.steps <= 0) return false
    for (let j = 0; j < count; j++) if (current[j] === m) return true
    return false
  }
}

/** What collect() keeps beyond the byte cap. */
export interface CollectOptions {
  /** Files kept at most, however small (a sandbox can make a million empty ones). Default 10,000. */
  maxFiles?: number
  /**
   * The run's own redaction (the library's redactorFor, from the run's options: its `redact`, the key's
   * secrets and the environment's secret-named variables), applied to every kept file and its name.
   */
  redactor?: SecretRedactor
  /**
   * Directory entries looked at, at most (default 100,000): the walk runs on the server's one thread, and
   * a sandbox can make a million empty files in its wall time.
   */
  maxEntries?: number
  /** Glob states visited in all, at most (default 20 million, ~0.2 s): then nothing more matches. */
  maxSteps?: number
}

/**
 * Bytes of a file read at once: what collect() holds of it, redaction included, is a few of these, and
 * the server's thread is given back after each (a file where every other byte is a secret costs ~1 µs a
 * byte to redact: 64 MiB of it must not hold every other request for a minute).
 */
const CHUNK_BYTES = 16 * 1024

/** Lets the event loop serve what waits (the next chunk goes after it). */
const yieldThread = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Copies the workspace's regular files matching `globs` into `into`, at most `maxBytes` kept and
 * `maxFiles` in all; returns their paths as kept. Call it only once the sandbox is gone.
 * - Symlinks are never followed (lstat on the walk, O_NOFOLLOW on open); only regular files are read (a
 *   FIFO or a device is passed over, and opened O_NONBLOCK, so none can hold the walk); a file with more
 *   than one link is not read, since a hard link is how a sandbox names a file outside the workspace (one
 *   the server's uid can read and it cannot).
 * - Each file is streamed, a chunk at a time, through the run's redaction: the bytes kept after it count
 *   against `maxBytes` (a file that grows past what is left is not kept), and so do the bytes read before
 *   it (a file is read only up to the size it had when opened, and only if that fits), so neither the
 *   memory nor the work a sandbox can make of it grows with what it wrote.
 * - Its name is the program's output too ("$TOKEN.txt"): kept redacted. "[REDACTED]" has no `/` and makes
 *   no `..`, and the kept path is checked to be inside `into` all the same.
 */
export async function collect(
  workspace: string,
  into: string,
  globs: string[],
  maxBytes: number,
  { maxFiles = 10_000, redactor, maxEntries = 100_000, maxSteps = 20_000_000 }: CollectOptions = {},
): Promise<string[]> {
  if (globs.length === 0) return []
  const work: GlobBudget = { steps: maxSteps }
  const patterns = globs.map((glob) => globMatcher(glob, work))
  const redacting = redactor?.active ? redactor : null
  let entries = 0
  const kept: string[] = []
  const budget = { kept: maxBytes, read: maxBytes, full: false }
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES)
  const walk = async (rel: string, depth: number): Promise<void> => {
    if (depth > 32) return
    let names: string[]
    try {
      names = readdirSync(path.join(workspace, rel))
    } catch {
      return // gone, shut, or named past PATH_MAX: nothing of it is kept
    }
    for (const name of names) {
      if (budget.full || kept.length >= maxFiles || ++entries > maxEntries || work.steps <= 0) return
      const relPath = rel ? `${rel}/${name}` : name
      let st: Stats
      try {
        st = lstatSync(path.join(workspace, relPath))
      } catch {
        continue
      }
      if (st.isDirectory()) await walk(relPath, depth + 1)
      else if (st.isFile() && patterns.some((matches) => matches(relPath))) {
        if (!fits(st) || st.nlink !== 1) continue
        const keptPath = redacting ? redacting.text(relPath) : relPath
        const dest = path.join(into, keptPath)
        if (!dest.startsWith(`${into}/`)) continue
        if (await copyRedacted(path.join(workspace, relPath), dest, redacting, budget, chunk))
          kept.push(keptPath)
      }
    }
  }
  const fits = (st: Stats) => st.size <= budget.kept && st.size <= budget.read
  await walk('', 0)
  return kept
}

/**
 * Copies one file, redacted, charging `budget`; false (and nothing left at `dest`) when it is not kept: not
 * a regular file of one link, a name kept already, more than the room left once redacted, a full disk.
 */
async function copyRedacted(
  file: string,
  dest: string,
  redactor: SecretRedactor | null,
  budget: { kept: number; read: number; full: boolean },
  chunk: Buffer,
): Promise<boolean> {
  let src: number
  try {
    src = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch {
    return false
  }
  let out: number | undefined
  let written = 0
  let done = false
  try {
    const st = fstatSync(src)
    if (!st.isFile() || st.nlink !== 1 || st.size > budget.kept || st.size > budget.read) return false
    try {
      mkdirSync(path.dirname(dest), { recursive: true, mode: 0o700 })
      out = openSync(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    } catch {
      return false // a name that redacts to one kept already (or to its directory): the first stays
    }
    const target = out
    const put = (bytes: Buffer): boolean => {
      if (written + bytes.length > budget.kept) return false
      for (let at = 0; at < bytes.length; ) at += writeSync(target, bytes, at)
      written += bytes.length
      return true
    }
    const stream = redactor?.bytes()
    // Up to the size it had when opened: a file growing as it is read is cut there.
    for (let at = 0; at < st.size; ) {
      const n = readSync(src, chunk, 0, Math.min(chunk.length, st.size - at), at)
      if (n === 0) break
      at += n
      budget.read -= n
      const piece = chunk.subarray(0, n)
      if (!put(stream ? stream.push(piece) : piece)) return false
      await yieldThread()
    }
    if (stream && !put(stream.end())) return false
    budget.kept -= written
    done = true
    return true
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOSPC' || code === 'EDQUOT') budget.full = true // nothing more can be kept
    return false
  } finally {
    closeSync(src)
    if (out !== undefined) {
      closeSync(out)
      if (!done) {
        try {
          unlinkSync(dest)
        } catch {
          // the sweep of files/ takes it with its run
        }
      }
    }
  }
}
