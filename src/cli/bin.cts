#!/usr/bin/env node
// The `cordon` command. Agents start it once per command, so its start-up is kept short: `--version` is
// answered before anything else loads; the commands are one bundled file (dist/cli/cordon.cjs, built by
// esbuild: one file to read and compile instead of ~200 modules to resolve); and its compiled code is
// cached by V8's code cache, taken after a run, in a directory only this user can write, because a cache
// someone else could write would be code this process runs. (Node 22's own compile cache is taken when a
// module is compiled, before its functions are, so it holds little more than the top level: a run with it
// was ~11 ms slower on Node 24 than with a cache taken after the run.)
// CommonJS on purpose: Node 20 starts an ES module entry ~25 ms slower.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import Module from 'node:module'
import os from 'node:os'
import path from 'node:path'
import vm from 'node:vm'

type Cli = { cli(argv: string[]): Promise<void> }

/** $XDG_CACHE_HOME/cordon/v8 (or ~/.cache/…), 0700, every directory above owned by us or root and not
 * writable by others (unless sticky); null when there is no such place (then nothing is cached). */
function cacheDir(): string | null {
  if (process.env.CORDON_NO_COMPILE_CACHE) return null
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache')
  const dir = path.join(base, 'cordon', 'v8')
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    for (let at = dir; at !== path.dirname(at); at = path.dirname(at)) {
      const st = lstatSync(at)
      if (!st.isDirectory() || (st.uid !== process.getuid?.() && st.uid !== 0)) return null
      if (at === dir && (st.mode & 0o077) !== 0) return null
      if ((st.mode & 0o002) !== 0 && (st.mode & 0o1000) === 0) return null
    }
    return dir
  } catch {
    return null
  }
}

/** Other builds' or Nodes' caches kept beside this one's (~0.6 MB each). */
const KEEP_OTHER_CACHES = 3

/** Compiles the bundle with V8's code cache; after the run, caches what the run compiled. */
function loadCached(file: string, dir: string | null): Cli {
  // The bundle is ASCII (esbuild escapes the rest; scripts/bundle.mjs checks): latin1 decodes it ~4x
  // faster than utf8, which scans for multi-byte sequences.
  const source = readFileSync(file, 'latin1')
  // V8 checks cached code against the source's length only: code cached for another bundle of the same
  // length would run instead of this one. The key is the hash of the content scripts/bundle.mjs put first
  // (hashing here would load node:crypto, ~4 ms); a bundle without one is not cached.
  const hash = /^\/\* cordon-bundle ([0-9a-f]{64}) \*\//.exec(source)?.[1]
  const cacheFile = dir && hash && path.join(dir, `cordon-${process.version}-${process.arch}-${hash}.bin`)
  let cachedData: Buffer | undefined
  try {
    if (cacheFile) cachedData = readFileSync(cacheFile)
  } catch {
    // not cached yet
  }
  // From Node 21.7 the bundle's import() (a command outside it) goes to Node's own loader.
  const importModuleDynamically = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER
  // The bundle is a module's function already (scripts/bundle.mjs wraps it): no copy of it is made here.
  const script = new vm.Script(source, {
    filename: file,
    ...(cachedData ? { cachedData } : {}),
    ...(importModuleDynamically ? { importModuleDynamically } : {}),
  })
  const module = { exports: {} as Cli }
  const run = script.runInThisContext() as (...args: unknown[]) => void
  run(module.exports, Module.createRequire(file), module, file, path.dirname(file))
  if (cacheFile && (!cachedData || script.cachedDataRejected)) {
    // After the run, when more of it is compiled; written whole or not at all.
    process.once('beforeExit', () => {
      try {
        const tmp = `${cacheFile}.${process.pid}`
        writeFileSync(tmp, script.createCachedData(), { mode: 0o600 })
        renameSync(tmp, cacheFile)
        // Each build of cordon, on each Node, leaves one. The newest few stay: two cordons (a global one
        // and a project's) or two Nodes used in turn would otherwise delete each other's at every start.
        // (The directories Node's compile cache left, which earlier builds used from Node 22, all go.)
        const others: { name: string; at: number }[] = []
        for (const name of readdirSync(dir)) {
          if (/^cordon-.*\.bin$/.test(name) && name !== path.basename(cacheFile))
            others.push({ name, at: lstatSync(path.join(dir, name)).mtimeMs })
          if (/^v\d+\.\d+\.\d+-/.test(name)) rmSync(path.join(dir, name), { recursive: true, force: true })
        }
        others.sort((a, b) => b.at - a.at)
        for (const { name } of others.slice(KEEP_OTHER_CACHES)) rmSync(path.join(dir, name), { force: true })
      } catch {
        // no cache: only slower next time
      }
    })
  }
  return module.exports
}

/** `cordon run --server URL …`: a run made by a server, through the client. */
function remote(argv: string[]): boolean {
  if (argv[0] !== 'run') return false
  for (const arg of argv.slice(1)) {
    if (arg === '--') return false
    if (arg === '--server' || arg.startsWith('--server=')) return true
  }
  return false
}

async function main(argv: string[]): Promise<void> {
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
    const pkg = JSON.parse(readFileSync(path.join(__dirname, '../../package.json'), 'utf8')) as {
      version?: unknown
    }
    const line = `${typeof pkg.version === 'string' ? pkg.version : 'unknown'}\n`
    // Written to fd 1 directly: process.stdout, for a pipe, is a net.Socket whose making loads node:net and
    // node:stream, more than the rest of `--version` together (~5 ms on Node 24).
    try {
      writeSync(1, line)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      // The reader went away: exit as a Unix tool killed by SIGPIPE would, as the commands do (cli/pipes.ts).
      if (code === 'EPIPE') process.exitCode = 141
      // A full non-blocking pipe: the stream waits for room.
      else if (code === 'EAGAIN') process.stdout.write(line)
      else throw error
    }
    return
  }
  // The service's commands (and `mcp`, `wasm`) import it (kept out of the bundle) at run time, which code
  // compiled by vm.Script cannot do on Node 20: they take the modules, whose start-up matters less.
  // So does `run --server`, for the client (its flags come before `--`; a false match is only slower).
  const face =
    ['serve', 'keys', 'mcp', 'wasm'].includes(argv[0] ?? '') || (argv[0] === 'help' && argv[1] === 'wasm')
  if (face || remote(argv)) return ((await import('./program.js')) as Cli).cli(argv)
  const bundle = path.join(__dirname, 'cordon.cjs')
  // Without the bundle (a build without esbuild), the modules themselves: slower, the same commands.
  if (!existsSync(bundle)) return ((await import('./program.js')) as Cli).cli(argv)
  return loadCached(bundle, cacheDir()).cli(argv)
}

void main(process.argv.slice(2))
