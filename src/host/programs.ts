// Programs as a sandbox finds them: looked up on its PATH, then realpath'd, so `/usr/bin/../bin/ls` or a
// symlink named `echo` is judged by what it really runs.
import { accessSync, constants, realpathSync, statSync } from 'node:fs'
import path from 'node:path'
import { walkPath } from './walk.js'

/** The PATH a sandbox gets unless told otherwise; cordon finds its own tools (bwrap) on it too. */
export const SAFE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

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
  const walk = walkPath(root, p)
  return walk.ok ? walk.path : null
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
export function notRunnable(name: string, searchPath: string, cwd: string, root: string): string | null {
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
