// Resolve programs the way the sandbox will: look up on the sandbox's PATH, then realpath,
// so `/usr/bin/../bin/ls` or a symlink named `echo` is judged by what it really runs.
import { accessSync, constants, lstatSync, readlinkSync, realpathSync, statSync } from 'node:fs'
import path from 'node:path'
import { PolicyError } from '../errors.js'

export function isExecutableFile(file: string): boolean {
  // Most PATH entries miss: asking without an exception keeps a lookup cheap (a throw costs ~20 µs).
  const st = statSync(file, { throwIfNoEntry: false })
  if (!st?.isFile()) return false
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * `p` (absolute, as seen inside a sandbox whose root is the host directory `root`) with every symlink
 * resolved the way the kernel would inside it: absolute targets restart at `root`, `..` stops there.
 * Null when a component does not exist.
 */
export function realpathIn(root: string, p: string): string | null {
  if (root === '/') {
    try {
      return realpathSync(p)
    } catch {
      return null
    }
  }
  let rest = p.split('/').filter(Boolean)
  let done: string[] = []
  for (let hops = 0; rest.length > 0; ) {
    const part = rest.shift()!
    if (part === '.') continue
    if (part === '..') {
      done.pop()
      continue
    }
    let link: string | null = null
    try {
      if (lstatSync(path.join(root, ...done, part)).isSymbolicLink())
        link = readlinkSync(path.join(root, ...done, part))
    } catch {
      return null
    }
    if (link === null) {
      done.push(part)
      continue
    }
    if (++hops > 40) return null // a symlink loop
    if (link.startsWith('/')) done = []
    rest = [...link.split('/').filter(Boolean), ...rest]
  }
  return `/${done.join('/')}`
}

/** Where the sandbox looks for `name`: that path when it has a slash, else each PATH entry, in order. */
function candidates(name: string, searchPath: string, cwd: string): string[] {
  if (name.includes('/')) return [path.resolve(cwd, name)]
  return searchPath
    .split(':')
    .filter(Boolean)
    .map((dir) => path.resolve(cwd, dir, name))
}

/**
 * Absolute path of `name` as the sandbox would find it from `cwd` with `PATH`, or null when nothing is
 * there. `root` is the host directory the sandbox sees as / (another root filesystem), or '/'.
 */
export function findProgram(name: string, searchPath: string, cwd: string, root = '/'): string | null {
  for (const candidate of candidates(name, searchPath, cwd)) {
    const real = root === '/' ? candidate : realpathIn(root, candidate)
    if (real && isExecutableFile(root === '/' ? real : path.join(root, real))) return candidate
  }
  return null
}

/**
 * Why `name`, which nothing executable answers to, is there but cannot run, as a shell says it (exit 126):
 * a file without execute permission, by path or on the PATH; a directory named by a path (the PATH
 * lookup passes directories over). Null when nothing is there at all (127).
 */
function notRunnable(name: string, searchPath: string, cwd: string, root: string): string | null {
  for (const candidate of candidates(name, searchPath, cwd)) {
    const real = realpathIn(root, candidate)
    const st = real === null ? undefined : statSync(path.join(root, real), { throwIfNoEntry: false })
    if (st?.isFile()) return 'Permission denied (not executable)'
    if (st?.isDirectory() && name.includes('/')) return 'Is a directory'
  }
  return null
}

/** Real path (symlinks and `..` resolved, inside `root`) of what `name` runs, or null when nothing is there. */
export function resolveProgram(name: string, searchPath: string, cwd: string, root = '/'): string | null {
  const found = findProgram(name, searchPath, cwd, root)
  return found && realpathIn(root, found)
}

export type CommandCheck =
  /**
   * `real` is what policy judged and what is executed: the program's real path, no symlink left in it (a
   * name swapped after the judging cannot make another program run). `program` is the path as found, for
   * argv[0]: a venv's `bin/python` (a symlink) finds its pyvenv.cfg by it.
   */
  | { ok: true; program: string; real: string }
  | { ok: false; kind: 'not-found' | 'denied'; limit: string; message: string }

/** Resolve allow/deny entries to real paths; an entry naming nothing is invalid input. */
export function resolveRules(
  field: 'allow' | 'deny',
  entries: readonly string[],
  searchPath: string,
  cwd: string,
  root = '/',
): Set<string> {
  const out = new Set<string>()
  for (const [i, entry] of entries.entries()) {
    const real = resolveProgram(entry, searchPath, cwd, root)
    if (!real) throw new PolicyError(`${field}.${i}`, `"${entry}" names no executable on the sandbox PATH`)
    out.add(real)
  }
  return out
}

export function checkCommand(
  program: string,
  searchPath: string,
  cwd: string,
  allow: ReadonlySet<string>,
  deny: ReadonlySet<string>,
  root = '/',
): CommandCheck {
  const found = findProgram(program, searchPath, cwd, root)
  const real = found && realpathIn(root, found)
  if (!found || !real) {
    const why = notRunnable(program, searchPath, cwd, root)
    if (why) return { ok: false, kind: 'denied', limit: 'executable', message: `${program}: ${why}` }
    return { ok: false, kind: 'not-found', limit: program, message: `${program}: command not found` }
  }
  if (deny.has(real)) {
    return { ok: false, kind: 'denied', limit: 'deny', message: `${real} is on the deny list` }
  }
  if (allow.size > 0 && !allow.has(real)) {
    return { ok: false, kind: 'denied', limit: 'allow', message: `${real} is not on the allow list` }
  }
  return { ok: true, program: found, real }
}
