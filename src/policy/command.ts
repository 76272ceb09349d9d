// Resolve programs the way the sandbox will: look up on the sandbox's PATH, then realpath,
// so `/usr/bin/../bin/ls` or a symlink named `echo` is judged by what it really runs.
import { accessSync, constants, realpathSync, statSync } from 'node:fs'
import path from 'node:path'
import { PolicyError } from '../errors.js'

function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Absolute path of `name` as the sandbox would find it from `cwd` with `PATH`, or null when nothing is there. */
export function findProgram(name: string, searchPath: string, cwd: string): string | null {
  const candidates = name.includes('/')
    ? [path.resolve(cwd, name)]
    : searchPath
        .split(':')
        .filter(Boolean)
        .map((dir) => path.resolve(cwd, dir, name))
  for (const candidate of candidates) {
    if (isExecutableFile(candidate)) return candidate
  }
  return null
}

/** Real path (symlinks and `..` resolved) of what `name` runs, or null when nothing is there. */
export function resolveProgram(name: string, searchPath: string, cwd: string): string | null {
  const found = findProgram(name, searchPath, cwd)
  return found && realpathSync(found)
}

export type CommandCheck =
  /** `program` is the path as found (a venv's python must keep its own path); policy judged its real path. */
  { ok: true; program: string } | { ok: false; kind: 'not-found' | 'denied'; limit: string; message: string }

/** Resolve allow/deny entries to real paths; an entry naming nothing is invalid input. */
export function resolveRules(
  field: 'allow' | 'deny',
  entries: readonly string[],
  searchPath: string,
  cwd: string,
): Set<string> {
  const out = new Set<string>()
  for (const [i, entry] of entries.entries()) {
    const real = resolveProgram(entry, searchPath, cwd)
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
): CommandCheck {
  const found = findProgram(program, searchPath, cwd)
  const real = found && realpathSync(found)
  if (!found || !real)
    return { ok: false, kind: 'not-found', limit: program, message: `${program}: command not found` }
  if (deny.has(real))
    return { ok: false, kind: 'denied', limit: 'deny', message: `${real} is on the deny list` }
  if (allow.size > 0 && !allow.has(real)) {
    return { ok: false, kind: 'denied', limit: 'allow', message: `${real} is not on the allow list` }
  }
  return { ok: true, program: found }
}
