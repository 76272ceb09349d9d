// A path resolved component by component, as the kernel would: each symlink followed (absolute targets
// restart at the root, `..` stops there), at most MAX_HOPS of them. The one walker behind both the judging
// of policy paths (plan/paths.ts) and finding programs inside another root (programs.ts).
import { lstatSync, readlinkSync, type Stats } from 'node:fs'
import path from 'node:path'

/** Symlinks followed while resolving one path, as the kernel's own limit. */
export const MAX_HOPS = 40

export type Walk =
  | { ok: true; path: string }
  /** `at`: the component (as seen inside the root) where it failed; `code`: lstat's error, if any. */
  | { ok: false; why: 'missing' | 'loop' | 'unreachable'; at: string; code?: string }

/**
 * `p` (absolute, as seen inside a sandbox whose root is the host directory `root`) with every symlink
 * resolved. `inspect` sees each symlink before it is followed (as seen inside the root) and may throw.
 */
export function walkPath(root: string, p: string, inspect?: (at: string, st: Stats) => void): Walk {
  let rest = p.split('/').filter(Boolean)
  let done: string[] = []
  for (let hops = 0; rest.length > 0; ) {
    const part = rest.shift()!
    if (part === '.') continue
    if (part === '..') {
      done.pop()
      continue
    }
    const at = `/${[...done, part].join('/')}`
    let st: Stats | undefined
    try {
      st = lstatSync(path.join(root, at), { throwIfNoEntry: false })
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      // A file where a directory should be is a path that does not exist, as for the kernel.
      if (code === 'ENOTDIR') return { ok: false, why: 'missing', at }
      return { ok: false, why: 'unreachable', at, ...(code ? { code } : {}) }
    }
    if (!st) return { ok: false, why: 'missing', at }
    if (st.isSymbolicLink()) {
      inspect?.(at, st)
      if (++hops > MAX_HOPS) return { ok: false, why: 'loop', at }
      let link: string
      try {
        link = readlinkSync(path.join(root, at))
      } catch (error) {
        // Replaced since the lstat: as unreachable as a component lstat cannot see.
        const code = (error as NodeJS.ErrnoException).code
        return { ok: false, why: 'unreachable', at, ...(code ? { code } : {}) }
      }
      if (link.startsWith('/')) done = []
      rest = [...link.split('/').filter(Boolean), ...rest]
      continue
    }
    if (rest.length > 0 && !st.isDirectory()) return { ok: false, why: 'missing', at }
    done.push(part)
  }
  return { ok: true, path: `/${done.join('/')}` }
}
