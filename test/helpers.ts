// Shared test helpers: capability checks (a test that cannot run here is skipped with its reason) and
// ways to look at real processes.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after } from 'node:test'
import { probeCapabilities } from '../src/host/capabilities.js'
import { SPAWNER_PATH } from '../src/host/native.js'
import { isExecutableFile } from '../src/host/programs.js'
import type { Limits } from '../src/policy/schema.js'

const caps = probeCapabilities()

/** Reason the namespace tier cannot run here, or false when it can (for `{ skip }`). */
export const noNamespace: string | false = !caps.bwrap
  ? 'bubblewrap is not installed'
  : !caps.userns
    ? `user namespaces disabled: ${caps.usernsReason}`
    : false

/** Reason the process tier cannot run here (its launcher is built by `npm run build`), or false. */
export const noLauncher: string | false = caps.launcher
  ? false
  : 'the launcher (native/cordon-launch) is not built: no C compiler'

/** Reason a spawner cannot be opened here (it is built by `npm run build`), or false. */
export const noSpawner: string | false = isExecutableFile(SPAWNER_PATH)
  ? false
  : 'the spawner (native/cordon-spawner) is not built: no C compiler'

export const notRoot: string | false = caps.isRoot
  ? false
  : 'needs root: only root can give a sandbox its own uid'

const madeDirs: string[] = []
process.once('exit', () => {
  for (const dir of madeDirs) rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory, removed with everything in it when the test process exits. */
export function tempDir(prefix: string, { mode = 0o700, parent = os.tmpdir() } = {}): string {
  const dir = mkdtempSync(path.join(parent, prefix))
  madeDirs.push(dir)
  chmodSync(dir, mode)
  return dir
}

/** A fresh directory any sandbox uid may write (as root the sandbox runs as an unprivileged uid). */
export function worldWritableDir(prefix = 'cordon-test-'): string {
  return tempDir(prefix, { mode: 0o777 })
}

/** Pids of living processes whose command line contains `marker`. */
export function processesWith(marker: string): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ')
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.[0]
      if (cmdline.includes(marker) && state !== 'Z') out.push(Number(name))
    } catch {
      // exited while we looked
    }
  }
  return out
}

/** A unique number usable as a `sleep` duration, so a test can find exactly its own processes. */
export function marker(): string {
  return `${60 + Math.floor(Math.random() * 30)}.${process.pid}${Math.floor(Math.random() * 1e6)}`
}

/** Cgroups and private TMPDIRs a cordon host with this pid made and did not remove. */
export function leftBehind(hostPid: number): string[] {
  const cgroups = spawnSync('find', ['/sys/fs/cgroup', '-maxdepth', '8', '-name', `cordon-${hostPid}-*`], {
    encoding: 'utf8',
  }).stdout.split('\n')
  const tmp = readdirSync(os.tmpdir()).filter((name) => name.startsWith(`cordon-tmp-${hostPid}-`))
  return [...cgroups, ...tmp].filter(Boolean)
}

export async function waitFor(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (check()) return true
    await new Promise((r) => setTimeout(r, 20))
  }
  return check()
}

export const TIERS = ['namespace', 'process'] as const
export const skipTier = (tier: (typeof TIERS)[number]) => (tier === 'namespace' ? noNamespace : noLauncher)

/** mulberry32: a small deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const LIBRARY = new URL('../dist/index.js', import.meta.url).href
export const NOBODY = { uid: 65534, gid: 65534 }

/** Reason `asUnprivileged` cannot run here (a checkout nobody may read, e.g. under /root), or false. */
export function noUnprivileged(): string | false {
  if (!caps.isRoot) return false
  const probe = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `await import(${JSON.stringify(LIBRARY)})`],
    {
      ...NOBODY,
      cwd: '/',
      stdio: 'ignore',
      timeout: 10_000,
    },
  )
  return probe.status === 0 ? false : `the built library (${LIBRARY}) cannot be loaded by uid 65534 (nobody)`
}

/**
 * Run `body` (an async ESM function body with `run` and `start` from cordon's built library in scope) as an
 * unprivileged user — nobody (65534) when the tests run as root — and resolve with the JSON it returns;
 * rejects when it has not returned within `timeoutMs`. The sandbox then has no uid of its own and, without
 * delegated cgroups, no cgroup: what a developer's own account gets.
 */
export function asUnprivileged<T>(body: string, timeoutMs = 30_000): Promise<T> {
  const code = `import { run, start } from ${JSON.stringify(LIBRARY)}\nconst out = await (async () => { ${body} })()\nprocess.stdout.write(JSON.stringify(out))`
  const drop = caps.isRoot ? NOBODY : {}
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      cwd: os.tmpdir(),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...drop,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (b: Buffer) => (stdout += b))
    child.stderr.on('data', (b: Buffer) => (stderr += b))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('close', (code) => {
      clearTimeout(timer)
      if (code === 0) resolve(JSON.parse(stdout) as T)
      else
        reject(
          new Error(
            `unprivileged script ended with ${code ?? 'a kill'} after ${timeoutMs} ms at most: ${stderr}`,
          ),
        )
    })
  })
}

/** Small limits for unit tests of what reads them (classify, outcome, the stopper): `over` changes some. */
export function testLimits(over: Partial<Limits> = {}): Limits {
  return {
    wallTimeMs: 2000,
    cpuTimeMs: 1500,
    memoryBytes: 256 * 1024 * 1024,
    maxProcesses: 16,
    maxOpenFiles: 1024,
    maxFileSizeBytes: 64 * 1024,
    maxOutputBytes: 1000,
    tmpfsBytes: 64 * 1024 * 1024,
    maxLogBytes: 1024,
    killGraceMs: 100,
    ...over,
  }
}

export interface Served {
  child: ChildProcess
  url: string
  /** Printed on a data dir's first start only. */
  adminKey: string | null
  stdout: () => string
  /** The last 4 KiB of its stderr (a JSON log line per request), for a failure's message. */
  stderr: () => string
  exited: Promise<number | null>
}

const served: ChildProcess[] = []
const stopServed = () => {
  for (const child of served) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}
// After the file's tests: a failed assertion must not leave a server whose pipes keep the file running.
after(stopServed)
process.once('exit', stopServed)

/** The built CLI's `cordon serve --port 0` on `dataDir`, once it printed the address it listens on. */
export async function startServe(
  dataDir: string,
  args: string[] = [],
  options: { nodeArgs?: string[] } = {},
): Promise<Served> {
  const cli = new URL('../dist/cli/bin.cjs', import.meta.url).pathname
  const argv = [...(options.nodeArgs ?? []), cli, 'serve', '--port', '0', '--data-dir', dataDir, ...args]
  const child = spawn(process.execPath, argv, {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  served.push(child)
  let stdout = ''
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => {
    stderr = (stderr + s).slice(-4096)
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address in 20 s: ${stdout}${stderr}`)), 20_000)
    child.stdout?.setEncoding('utf8').on('data', (s: string) => {
      stdout += s
      const m = /^cordon: listening on (http:\/\/\S+)$/m.exec(stdout)
      if (m) {
        clearTimeout(timer)
        resolve(m[1] as string)
      }
    })
    child.on('exit', () => reject(new Error(`exited: ${stdout}${stderr}`)))
  })
  const adminKey = /^cordon: admin key: (cordon_\S+)$/m.exec(stdout)?.[1] ?? null
  return { child, url, adminKey, stdout: () => stdout, stderr: () => stderr, exited }
}
