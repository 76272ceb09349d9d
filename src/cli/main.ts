#!/usr/bin/env node
// The `cordon` command. Agents start it once per command, so its start-up is kept short: a cached compile
// of cordon and its dependencies where Node offers one (22.1+), `--version` answered before anything else
// is loaded, and the commands (zod, commander, the engine) imported only after that.
import { lstatSync, mkdirSync, readFileSync } from 'node:fs'
import module from 'node:module'
import os from 'node:os'
import path from 'node:path'

/**
 * V8's compile cache, in a directory only this user can write: a cache someone else could write would be
 * code this process runs (the default, under /tmp, is shared). Skipped when there is no such place.
 */
function enableCompileCache(): void {
  const enable = (module as { enableCompileCache?: (dir: string) => unknown }).enableCompileCache
  if (!enable || process.env.CORDON_NO_COMPILE_CACHE) return
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache')
  const dir = path.join(base, 'cordon', 'v8')
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    for (let at = dir; at !== path.dirname(at); at = path.dirname(at)) {
      const st = lstatSync(at)
      const mine = st.uid === process.getuid?.() || st.uid === 0
      if (!st.isDirectory() || !mine || (at === dir && (st.mode & 0o077) !== 0)) return
      // A sticky world-writable parent (/tmp) lets others make names beside ours, not replace ours.
      if ((st.mode & 0o002) !== 0 && (st.mode & 0o1000) === 0) return
    }
    enable(dir)
  } catch {
    // No cache: only slower.
  }
}

const argv = process.argv.slice(2)
if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
  // package.json is two levels up from both src/cli/main.ts and dist/cli/main.js.
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version?: unknown
  }
  process.stdout.write(`${typeof pkg.version === 'string' ? pkg.version : 'unknown'}\n`)
} else {
  enableCompileCache()
  const { cli } = await import('./program.js')
  await cli(argv)
}
