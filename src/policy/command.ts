// The command check: what a sandbox would run (host/programs.ts finds it), judged against allow and deny.
import { PolicyError } from '../errors.js'
import { findProgram, notRunnable, realpathIn, resolveProgram } from '../host/programs.js'

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
