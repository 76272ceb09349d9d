// Benchmark (not a test): what cordon costs on top of the tools it wraps, measured in one run on this
// machine and printed as ratios against targets. Baselines launch exactly what cordon's plan launches
// (checked against `prepare`), so the difference is cordon's own supervision. `--quick` cuts iterations ~5×.
import { type SpawnOptions, spawn } from 'node:child_process'
import {
  constants as fsConstants,
  mkdirSync,
  mkdtempSync,
  openSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import type { Writable } from 'node:stream'
import { StringDecoder } from 'node:string_decoder'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { serve as listen } from '@hono/node-server'
import { SandboxCgroup } from '../src/host/cgroup.js'
import { cgroupDirs, joinFiles, ownCgroupView, sandboxCgroupName } from '../src/host/cgroups.js'
import { listProcesses } from '../src/host/procs.js'
import { findProgram } from '../src/host/programs.js'
import { isSocket, recentHostSockets } from '../src/host/sockets.js'
import {
  createSandbox,
  defaultSpawner,
  type Isolation,
  probeCapabilities,
  type RunOptions,
  run,
  start,
} from '../src/index.js'
import { bwrapArgs, type CgroupView } from '../src/plan/bwrap.js'
import {
  FIRST_PATH_FD,
  IDENTITY_FDS,
  LOG_FD,
  pipedFds,
  REFUSAL_FD,
  SECCOMP_FD,
  STATUS_FD,
} from '../src/plan/fd-layout.js'
import { type IdentityPath, identityFiles } from '../src/plan/identity.js'
import { LANDLOCK_SCOPES, launcherArgv } from '../src/plan/launcher.js'
import { O_PATH } from '../src/plan/paths.js'
import { prepare } from '../src/plan/plan.js'
import { DEVICES_WRITABLE, processTierNetns } from '../src/plan/process.js'
import { processMounts, ROOT_TMPDIR } from '../src/plan/process-mounts.js'
import { rlimitArgs } from '../src/plan/rlimits.js'
import { buildEnv } from '../src/policy/env.js'
import { defaultHide, MiB, parseCommand, parsePolicy } from '../src/policy/schema.js'
import { createApp } from '../src/service/http/app.js'
import { createService } from '../src/service/service.js'
import { wasmRows } from './wasm.js'

const quick = process.argv.includes('--quick')
const scaled = (n: number) => (quick ? Math.max(1, Math.round(n / 5)) : n)
const LATENCY_RUNS = scaled(200)
const LATENCY_WARMUP = scaled(20)
const THROUGHPUT_RUNS = scaled(400)
const THROUGHPUT_ROUNDS = quick ? 2 : 4
const CONCURRENCY = 16
/** A warm sandbox's members (createSandbox({ warm })). */
const WARM_MEMBERS = 2
const IDLE_RUNS = scaled(50)
const IDLE_MS = 50
const OUTPUT_BYTES = 256 * MiB
const OUTPUT_ROUNDS = quick ? 1 : 7
const OUTPUT_WARMUP = 2
const REDACT_BYTES = 64 * MiB
const REDACT_ROUNDS = quick ? 1 : 3
const HOST_EXTRA = 512 * MiB
const STARTUP_RUNS = scaled(40)
const STARTUP_WARMUP = scaled(5)
const FIRST_OUTPUT_RUNS = scaled(30)
const FIRST_OUTPUT_WARMUP = scaled(5)
/** The built CLI, as `npx cordon` runs it. */
const CLI = new URL('../dist/cli/bin.cjs', import.meta.url).pathname
const LIB = new URL('../dist/index.js', import.meta.url).href

// A full collection between heavy steps keeps one variant's garbage from being billed to the next.
setFlagsFromString('--expose-gc')
const gcFn: unknown = runInNewContext('gc')
const gc = () => {
  if (typeof gcFn === 'function') gcFn()
}

// ---- What cordon launches, rebuilt from its pure builders ------------------------------------------------

const caps = probeCapabilities()
const prlimit = findProgram('prlimit', `/usr/bin:/bin:${process.env.PATH ?? ''}`, '/')
if (!caps.bwrap || !prlimit || !caps.launcher) {
  throw new Error('bench needs bwrap and prlimit (util-linux) installed and the launcher built')
}
const cwd = realpathSync(process.cwd())
// The process tier's launcher enters the cwd by the fd cordon judged it on: the raw runs pass one too.
const cwdPathFd = openSync(cwd, O_PATH | fsConstants.O_DIRECTORY)
const env: Record<string, string> = { ...buildEnv(process.env, [], {}), CORDON_LOG_FD: String(LOG_FD) }
const limits = parsePolicy({}).limits
// The namespace tier hides cordon's home by default; the plan binds them as real paths, if they exist.
const hide = defaultHide().flatMap((p) => {
  try {
    const real = realpathSync(path.resolve(cwd, p))
    return real === '/' ? [] : [{ path: real, dir: statSync(real).isDirectory() }]
  } catch {
    return []
  }
})
const TRUE = findProgram('true', env.PATH ?? '', cwd)
if (!TRUE) throw new Error('`true` not found on the sandbox PATH')
// When root, cordon drops each sandbox to a pool uid (a random one of 1000); the baselines drop too, cycling
// through 1000 uids just above cordon's default pool so cordon's per-uid cleanup never meets them. A single
// fixed uid would not do: bwrap's pid-1 outlives its monitor as a zombie until the host's init reaps it, and
// those zombies count against the RLIMIT_NPROC that prlimit sets for the uid.
const RAW_UID_FIRST = 61_000
const RAW_UIDS = 1000
const RAW_GID = 60_000
let rawUidTurn = 0
const dropUid = (): SpawnOptions =>
  caps.isRoot ? { uid: RAW_UID_FIRST + (rawUidTurn++ % RAW_UIDS), gid: RAW_GID } : {}

interface Launch {
  file: string
  args: string[]
  cwd: string
  env: Record<string, string>
  /** cordon's launcher drops to the sandbox uid itself, so it is spawned as root; prlimit is spawned as the uid. */
  dropsItself: boolean
  /** Data written to extra fds of the child, by fd number (bwrap's seccomp program). */
  feeds: Map<number, Buffer>
  /** Host fds the child gets as its own, by its fd number (the judged cwd). */
  passFds: Map<number, number>
}

/** What a cordon run adds to the argv that the raw baselines leave out: they are part of what cordon costs. */
interface CordonParts {
  /** The cgroup files the launcher joins. */
  join: string[]
  /** The process tier's launcher makes the private TMPDIR (the raw runs share one made up front). */
  mkdir: boolean
  /**
   * 'launcher': cordon's own launcher in front (as cordon runs it); 'prlimit': the same rlimits and bwrap
   * flags through util-linux prlimit, spawned as the sandbox uid — what one would write by hand.
   */
  via: 'launcher' | 'prlimit'
}
const RAW: CordonParts = { join: [], mkdir: false, via: 'launcher' }

/**
 * The argv cordon's plan launches, from the same builders, with or without `parts`. The seccomp program,
 * when there is one, goes to bwrap or the launcher on the same fd as cordon sends it.
 */
function noKeeps(keeps: readonly string[]): [] {
  if (keeps.length > 0)
    throw new Error(`the raw process tier cannot show ${keeps.join(', ')} again: run the bench elsewhere`)
  return []
}

function rawLaunch(
  tier: Isolation,
  program: readonly string[],
  cgroup: boolean,
  parts: CordonParts,
  seccomp: Buffer | null,
  uid: { uid: number; gid: number } | null = null,
  scratch: string | null = null,
  // The raw runs have no cgroup: an empty /sys/fs/cgroup, as cordon shows a run without one.
  cgroups: CgroupView = { binds: [], links: [] },
): Launch {
  const overheadProcesses = tier === 'namespace' ? 2 : 0
  const rlimits = rlimitArgs(limits, { ownUid: caps.isRoot, overheadProcesses, cgroup })
  const fenced = tier === 'process'
  // cordon's own /etc/passwd and /etc/group, as the plan makes them (memfds for bwrap, files as root).
  const mounts =
    fenced && caps.isRoot
      ? processMounts({ network: 'none', shown: [cwd], writable: [], shm: realpathSync('/dev/shm') })
      : null
  const tmpdir = fenced ? (scratch ?? (mounts ? ROOT_TMPDIR : null)) : null
  const who = uid ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }
  const identity = identityFiles(who.uid, who.gid, tmpdir ?? env.HOME ?? '/')
  const identityShown: IdentityPath[] = []
  const inner = fenced
    ? program
    : [
        caps.bwrap!,
        ...bwrapArgs({
          writable: [],
          cwd,
          network: 'none',
          tmpfsBytes: limits.tmpfsBytes,
          hide,
          ...(seccomp ? { seccompFd: SECCOMP_FD } : {}),
          statusFd: STATUS_FD,
          sockets: recentHostSockets(),
          socketLive: isSocket,
          cgroups,
          identityFd: (p) => {
            identityShown.push(p)
            return IDENTITY_FDS[p]
          },
        }),
        '--',
        ...program,
      ]
  const viaPrlimit = parts.via === 'prlimit'
  if (viaPrlimit && fenced) throw new Error('the process tier has no prlimit form')
  const argv = viaPrlimit
    ? [prlimit!, ...rlimits, '--', ...inner]
    : launcherArgv({
        launcher: caps.launcher!,
        keepFds: [...pipedFds(tier, seccomp !== null, false), ...(fenced ? [FIRST_PATH_FD] : [])],
        ...(fenced ? { cwdFd: FIRST_PATH_FD } : {}),
        rlimits,
        join: parts.join,
        scratch: parts.mkdir ? scratch : null,
        unshareNet: fenced && processTierNetns(caps, seccomp !== null),
        unshareIpc: fenced && caps.isRoot,
        // Kept paths come from judged fds, which a raw run has none of: the bench runs where none is needed.
        // As root the process tier's own mount namespace is part of what it is, raw or not.
        mounts: mounts && {
          ...mounts,
          keeps: noKeeps(mounts.keeps),
          tmpfsBytes: limits.tmpfsBytes,
          files: mounts.identity.map((p) => ({ path: p, content: identity[p] })),
        },
        memfds: identityShown.map((p) => ({ fd: IDENTITY_FDS[p], content: identity[p] })),
        drop: uid,
        writable:
          fenced && caps.landlock >= 1
            ? [...(mounts ? mounts.writable : [scratch!]), ...DEVICES_WRITABLE]
            : null,
        scope: {
          signals: fenced && caps.landlock >= LANDLOCK_SCOPES,
          abstractUnix: fenced && caps.landlock >= LANDLOCK_SCOPES,
        },
        seccomp: fenced ? seccomp : null,
        bwrapEnv: !fenced,
        monitor: fenced,
        killSession: fenced && uid === null && !cgroup,
        program: inner,
      })
  // Like cordon: a pipe for bwrap's status fd, the launcher's refusal pipe and one for the log channel,
  // besides the seccomp program.
  const empty = Buffer.alloc(0)
  const feeds = new Map<number, Buffer>([
    ...(tier === 'namespace' ? ([[STATUS_FD, empty]] as const) : []),
    [REFUSAL_FD, empty],
    ...(seccomp && tier === 'namespace' ? ([[SECCOMP_FD, seccomp]] as const) : []),
    [LOG_FD, empty],
    // By hand, bwrap reads cordon's /etc files from pipes; cordon's launcher makes memfds of them.
    ...(viaPrlimit ? identityShown.map((p) => [IDENTITY_FDS[p], Buffer.from(identity[p])] as const) : []),
  ])
  return {
    file: argv[0]!,
    args: argv.slice(1),
    cwd: '/',
    env: tmpdir ? { ...env, TMPDIR: tmpdir, HOME: tmpdir } : env,
    feeds,
    dropsItself: !viaPrlimit && uid !== null,
    passFds: new Map(fenced ? [[FIRST_PATH_FD, cwdPathFd]] : []),
  }
}

/**
 * The baseline is only fair if it launches what cordon launches: rebuild cordon's plan for `options` with
 * the builders, check it against `prepare`, and return the same launch without the cgroup (`via` the
 * launcher, or prlimit for the namespace tier).
 */
function baselineFor(tier: Isolation, options: RunOptions, via: CordonParts['via'] = 'launcher'): Launch {
  const program = [TRUE!]
  const prepared = prepare(['true'], parsePolicy(options), caps)
  if (prepared.kind !== 'launch')
    throw new Error(`cordon refused the ${tier} tier: ${prepared.violation.message}`)
  const { plan } = prepared
  // The uid and fds go back at once; the process tier's private TMPDIR serves the raw runs and goes at exit.
  plan.lease?.release()
  plan.pathFds.close()
  if (plan.scratch) {
    mkdirSync(plan.scratch)
    scratchDirs.push(plan.scratch)
  }
  const uid = plan.lease && { uid: plan.lease.uid, gid: plan.lease.gid }
  const launch = (parts: CordonParts, cgroups?: CgroupView) =>
    rawLaunch(tier, program, plan.cgroup !== null, parts, plan.seccomp, uid, plan.scratch, cgroups)
  const join = plan.cgroup ? joinFiles(plan.cgroup.support.version, plan.cgroup.dirs) : []
  const expected = launch({ join, mkdir: plan.scratch !== null, via: 'launcher' }, ownCgroupView(plan.cgroup))
  const same =
    plan.tier === tier &&
    plan.file === expected.file &&
    plan.cwd === expected.cwd &&
    JSON.stringify(plan.args) === JSON.stringify(expected.args) &&
    JSON.stringify(plan.env) === JSON.stringify(expected.env)
  if (!same) {
    throw new Error(
      `raw ${tier} baseline differs from cordon's plan:\n` +
        `  raw:    ${expected.file} ${expected.args.join(' ')}\n  cordon: ${plan.file} ${plan.args.join(' ')}`,
    )
  }
  return launch({ ...RAW, via })
}
const scratchDirs: string[] = []

// ---- Launchers ------------------------------------------------------------------------------------------

/** collect: keep and join the chunks; keep: only hold on to them; count: drop them; decode: into one string. */
type Sink = 'collect' | 'keep' | 'count' | 'decode'

/**
 * Spawn with three pipes like cordon does, end stdin, write `feeds` to extra fds, and consume output per
 * `sink`; resolves with the bytes read from stdout on close.
 */
function spawnPiped(
  file: string,
  args: readonly string[],
  options: SpawnOptions,
  sink: Sink,
  feeds: ReadonlyMap<number, Buffer> = new Map(),
  passFds: ReadonlyMap<number, number> = new Map(),
): Promise<number> {
  return new Promise((resolve, reject) => {
    const fds = Math.max(3, ...[...feeds.keys(), ...passFds.keys()].map((fd) => fd + 1))
    const stdio = Array.from({ length: fds }, (_, fd) =>
      fd < 3 || feeds.has(fd) ? 'pipe' : (passFds.get(fd) ?? 'ignore'),
    )
    const child = spawn(file, args, { ...options, stdio })
    for (const [fd, data] of feeds) {
      const pipe = child.stdio[fd] as Writable | null | undefined
      pipe?.on('error', () => {}) // bwrap closes its end once it has read the program
      pipe?.end(data)
    }
    const chunks: Buffer[] = []
    const errChunks: Buffer[] = []
    const decoder = new StringDecoder('utf8')
    let text = ''
    let bytes = 0
    child.stdin!.on('error', () => {})
    child.stdin!.end()
    child.stdout!.on('data', (b: Buffer) => {
      bytes += b.length
      if (sink === 'collect' || sink === 'keep') chunks.push(b)
      else if (sink === 'decode') text += decoder.write(b)
    })
    child.stderr!.on('data', (b: Buffer) => errChunks.push(b))
    child.on('error', reject)
    child.on('close', (code, signal) => {
      let kept = bytes
      if (sink === 'collect') kept = Buffer.concat(chunks).length
      else if (sink === 'keep') kept = chunks.reduce((n, c) => n + c.length, 0)
      else if (sink === 'decode') kept = (text + decoder.end()).length
      const stderr = Buffer.concat(errChunks).toString()
      if (code !== 0 || kept !== bytes) {
        reject(new Error(`${file} failed (code ${code}, signal ${signal}): ${stderr.trim()}`))
      } else resolve(bytes)
    })
  })
}

function rawRun(launch: Launch): Promise<number> {
  const drop = dropUid()
  if (!launch.dropsItself) {
    return spawnPiped(
      launch.file,
      launch.args,
      { cwd: launch.cwd, env: launch.env, detached: true, ...drop },
      'collect',
      launch.feeds,
      launch.passFds,
    )
  }
  // Same argv with this run's rotating uid in the launcher's flags, spawned as root like cordon does.
  const args = launch.args.map((a) =>
    a.startsWith('--uid=') ? `--uid=${drop.uid}` : a.startsWith('--gid=') ? `--gid=${drop.gid}` : a,
  )
  return spawnPiped(
    launch.file,
    args,
    { cwd: launch.cwd, env: launch.env, detached: true },
    'collect',
    launch.feeds,
    launch.passFds,
  )
}

async function cordonRun(command: readonly string[], options: RunOptions, expectBytes = 0): Promise<number> {
  const result = await run(command, options)
  if (result.status !== 'ok' || result.outputBytes !== expectBytes || result.stdout.length !== expectBytes) {
    throw new Error(`cordon run failed: ${result.status} ${result.violation?.message ?? ''} ${result.stderr}`)
  }
  return result.outputBytes
}

// ---- The HTTP service, in this process ------------------------------------------------------------------

/** Wall-clock ms with sub-ms precision (CLOCK_REALTIME at start plus the monotonic clock since). */
const wallMs = () => performance.timeOrigin + performance.now()

/**
 * A program that sleeps, prints the CLOCK_REALTIME it writes at (ns, from `date`), then stays a while, so
 * that its output reaches the reader while it still runs (not flushed by its exit).
 */
const STAMP_CMD = ['sh', '-c', 'sleep 0.05; date +%s%N; sleep 0.1']
const stampOf = (text: string): number => {
  const m = /^(\d{19})$/m.exec(text)
  if (!m) throw new Error(`no timestamp in ${JSON.stringify(text)}`)
  return Number(BigInt(m[1]!) / 1000n) / 1000
}

interface Served {
  url: string
  key: string
  /** Runs that took a warm member (`warm`), and those that ran cold. */
  paths(): { warm: number; cold: number }
  close(): Promise<void>
}

/** createService + the app on a loopback port, its data dir in a temp dir, as `cordon serve` starts them. */
async function startService(concurrency: number, warm = 0): Promise<Served> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'cordon-bench-serve-'))
  const { service, adminKey } = await createService({ dataDir, concurrency, maxQueued: 1000, warm })
  if (!adminKey) throw new Error('a fresh data dir must give an admin key')
  const { app } = createApp(service)
  const server = await new Promise<ReturnType<typeof listen>>((resolve, reject) => {
    const s = listen({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s))
    s.once('error', reject)
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    key: adminKey,
    paths: () => {
      const stats = service.warm?.stats()
      return { warm: stats?.warmRuns ?? 0, cold: stats?.coldRuns ?? 0 }
    },
    async close() {
      await service.drain()
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        if ('closeAllConnections' in server) server.closeAllConnections()
      })
      await service.close()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

interface ServedRun {
  id: string
  state: string
  result?: { status: string; stdout: string; violation?: { message?: string } }
}

async function httpCall(s: Served, route: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${s.key}`)
  return fetch(`${s.url}${route}`, { ...init, headers })
}

/** POST /v1/runs (with `wait` when asked); throws unless it answers 201 (and, waited, finished ok). */
async function httpRun(s: Served, cmd: readonly string[], wait: boolean): Promise<ServedRun> {
  const res = await httpCall(s, '/v1/runs', {
    method: 'POST',
    body: JSON.stringify({ cmd, ...(wait ? { wait: '60s' } : {}) }),
  })
  const body = (await res.json()) as ServedRun
  if (res.status !== 201) throw new Error(`POST /v1/runs: ${res.status} ${JSON.stringify(body)}`)
  if (wait && body.result?.status !== 'ok')
    throw new Error(`served run failed: ${body.state} ${JSON.stringify(body.result)}`)
  return body
}

/**
 * Submits STAMP_CMD, follows its events, and answers how long after the program wrote its line the first
 * `output` event was read here (ms), then waits for the run's end.
 */
async function sseFirstOutput(s: Served): Promise<number> {
  const { id } = await httpRun(s, STAMP_CMD, false)
  const res = await httpCall(s, `/v1/runs/${id}/events`)
  if (res.status !== 200) throw new Error(`GET events: ${res.status}`)
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  let delay: number | null = null
  while (delay === null) {
    const { value, done } = await reader.read()
    const seen = wallMs()
    if (done) throw new Error('the event stream ended before any output')
    buffer += decoder.decode(value, { stream: true })
    for (let end = buffer.indexOf('\n\n'); end >= 0 && delay === null; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      if (!/^event: output$/m.test(block)) continue
      const data = /^data: (.*)$/m.exec(block)?.[1] ?? '{}'
      delay = seen - stampOf((JSON.parse(data) as { data: string }).data)
    }
  }
  await reader.cancel().catch(() => {})
  const done = (await (await httpCall(s, `/v1/runs/${id}?wait=60s`)).json()) as ServedRun
  if (done.result?.status !== 'ok') throw new Error(`served run failed: ${JSON.stringify(done.result)}`)
  return delay
}

/** The same through the library's start(): when its first output chunk reached this process. */
async function libFirstOutput(): Promise<number> {
  const handle = start(STAMP_CMD, { stdin: '' })
  let delay: number | null = null
  for await (const chunk of handle.output) {
    if (delay === null) delay = wallMs() - stampOf(chunk.data)
  }
  const result = await handle.result
  if (result.status !== 'ok' || delay === null) throw new Error(`library run failed: ${result.status}`)
  return delay
}

/** Each task's own figure (not its wall time), interleaved as interleavedLatency interleaves. */
async function interleavedFigures(tasks: readonly (() => Promise<number>)[], runs: number, warmup: number) {
  const samples: number[][] = tasks.map(() => [])
  gc()
  for (let i = 0; i < warmup + runs; i++) {
    for (let k = 0; k < tasks.length; k++) {
      const t = (i + k) % tasks.length
      const figure = await tasks[t]!()
      if (i >= warmup) samples[t]!.push(figure)
    }
  }
  return samples.map(summarize)
}

// ---- Measurement ----------------------------------------------------------------------------------------

interface Samples {
  median: number
  p90: number
}

function summarize(xs: number[]): Samples {
  const s = [...xs].sort((a, b) => a - b)
  const rank = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!
  return { median: rank(0.5), p90: rank(0.9) }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Sequential latency of each task; every iteration runs all of them, rotating who goes first. With `idleMs`
 * each run starts after that much quiet.
 */
async function interleavedLatency(
  tasks: readonly (() => Promise<unknown>)[],
  runs: number,
  warmup: number,
  idleMs = 0,
) {
  const samples: number[][] = tasks.map(() => [])
  gc()
  for (let i = 0; i < warmup + runs; i++) {
    for (let k = 0; k < tasks.length; k++) {
      const t = (i + k) % tasks.length
      if (idleMs > 0) await sleep(idleMs)
      const started = performance.now()
      await tasks[t]!()
      if (i >= warmup) samples[t]!.push(performance.now() - started)
    }
  }
  return samples.map(summarize)
}

/** Wall time of `runs` tasks with `concurrency` of them in flight. */
async function timeConcurrent(task: () => Promise<unknown>, runs: number, concurrency: number) {
  let next = 0
  const started = performance.now()
  const worker = async () => {
    while (next < runs) {
      next++
      await task()
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return performance.now() - started
}

/** Runs per second of each task at `concurrency`, split into rounds that alternate which goes first. */
async function interleavedThroughput(tasks: readonly (() => Promise<unknown>)[], runs: number) {
  const ms = tasks.map(() => 0)
  const perRound = Math.ceil(runs / THROUGHPUT_ROUNDS)
  for (const task of tasks) await timeConcurrent(task, CONCURRENCY, CONCURRENCY) // warm-up
  for (let r = 0; r < THROUGHPUT_ROUNDS; r++) {
    for (let k = 0; k < tasks.length; k++) {
      const t = (r + k) % tasks.length
      gc()
      ms[t]! += await timeConcurrent(tasks[t]!, perRound, CONCURRENCY)
    }
  }
  return ms.map((total) => (perRound * THROUGHPUT_ROUNDS) / (total / 1000))
}

/**
 * Median MiB/s of each task moving OUTPUT_BYTES, over rounds that rotate the order, after OUTPUT_WARMUP
 * unmeasured rounds: the first big runs in a process also pay for growing the heap and first-touching the
 * memory behind it (slow in a VM), and cordon, keeping the most text, would pay most.
 */
async function interleavedOutput(tasks: readonly (() => Promise<number>)[], rounds: number) {
  const rates: number[][] = tasks.map(() => [])
  for (let r = -OUTPUT_WARMUP; r < rounds; r++) {
    for (let k = 0; k < tasks.length; k++) {
      const t = (r + OUTPUT_WARMUP + k) % tasks.length
      gc()
      const started = performance.now()
      const bytes = await tasks[t]!()
      const seconds = (performance.now() - started) / 1000
      if (bytes !== OUTPUT_BYTES) throw new Error(`moved ${bytes} bytes, expected ${OUTPUT_BYTES}`)
      if (r >= 0) rates[t]!.push(bytes / MiB / seconds)
    }
  }
  return rates.map((xs) => summarize(xs).median)
}

/** Mean microseconds per call of a synchronous step, after a short warm-up. */
function microseconds(fn: () => unknown, calls: number): number {
  for (let i = 0; i < Math.min(50, calls); i++) fn()
  const started = performance.now()
  for (let i = 0; i < calls; i++) fn()
  return ((performance.now() - started) / calls) * 1000
}

// ---- Report ---------------------------------------------------------------------------------------------

interface Row {
  metric: string
  cordon: string
  baseline: string
  ratio: number
  /**
   * `<=` when lower is better for cordon (latency), `>=` when higher is; none for context rows. With
   * `absolute`, the target is that figure's (in `unit`) rather than the ratio's.
   */
  target?: { op: '<=' | '>='; value: number; absolute?: { figure: number; unit: string } }
}

const ms = (x: number) => `${x.toFixed(2)} ms`
const perSec = (x: number) => `${x.toFixed(0)} runs/s`
const mibs = (x: number) => `${x.toFixed(0)} MiB/s`

function printTable(rows: readonly Row[]): void {
  const cells = rows.map((r) => {
    const figure = r.target?.absolute?.figure ?? r.ratio
    const met = r.target ? (r.target.op === '<=' ? figure <= r.target.value : figure >= r.target.value) : null
    const unit = r.target?.absolute ? ` ${r.target.absolute.unit}` : '×'
    return [
      r.metric,
      r.cordon,
      r.baseline,
      `${r.ratio.toFixed(2)}×`,
      r.target ? `${r.target.op} ${r.target.value.toFixed(2)}${unit}` : '—',
      met === null ? '(info)' : met ? 'yes' : 'NO',
    ]
  })
  const header = ['metric', 'cordon', 'baseline', 'ratio', 'target', 'met']
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)))
  const line = (c: readonly string[]) =>
    c.map((s, i) => (i === 0 ? s.padEnd(widths[i]!) : s.padStart(widths[i]!))).join('  ')
  console.log(line(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const c of cells) console.log(line(c))
}

// ---- Main -----------------------------------------------------------------------------------------------

const latencyRows = (metric: string, cordon: Samples, base: Samples, target?: number): Row[] =>
  (['median', 'p90'] as const).map((q) => ({
    metric: `${metric} ${q}`,
    cordon: ms(cordon[q]),
    baseline: ms(base[q]),
    ratio: cordon[q] / base[q],
    ...(target === undefined ? {} : { target: { op: '<=' as const, value: target } }),
  }))

async function main(): Promise<void> {
  const benchStarted = performance.now()
  const trueCmd = ['true']
  const nsOptions: RunOptions = { isolation: 'namespace' }
  const procOptions: RunOptions = { isolation: 'process' }
  const rawNs = baselineFor('namespace', nsOptions, 'prlimit')
  const rawNsLauncher = baselineFor('namespace', nsOptions)
  const rawProc = baselineFor('process', procOptions)
  // With a cgroup available cordon uses one by default; the same runs without it show what it costs.
  const cgroups = caps.cgroup.version !== null
  const noCgroup = (options: RunOptions): RunOptions => ({ ...options, cgroup: { mode: 'off' } })
  // cordon's runs go through the default spawner (opened by a first run, in the background); the same runs
  // with `spawner: false` fork this (bench) process instead, as every run did before it was the default.
  await run(trueCmd, procOptions)
  for (let i = 0; i < 500 && !defaultSpawner(); i++) await sleep(10)
  if (!defaultSpawner()) throw new Error('the default spawner did not open')
  const forked = (options: RunOptions): RunOptions => ({ ...options, spawner: false })

  console.log(
    `cordon bench${quick ? ' --quick' : ''}: node ${process.version}, ${os.cpus().length} cpus, ` +
      `uid ${process.getuid?.()}, ${listProcesses().length} processes on host, ` +
      `cgroup ${cgroups ? `v${caps.cgroup.version}` : 'none'}`,
  )
  console.log(
    `latency: ${LATENCY_RUNS} runs after ${LATENCY_WARMUP} warm-up, interleaved (and ${IDLE_RUNS} ` +
      `${IDLE_MS} ms apart); throughput: ${THROUGHPUT_RUNS} runs at concurrency ${CONCURRENCY} in ` +
      `${THROUGHPUT_ROUNDS} alternating rounds; output: ${OUTPUT_BYTES / MiB} MiB × ${OUTPUT_ROUNDS} rotating rounds after ${OUTPUT_WARMUP} warm-up`,
  )
  const asUid = caps.isRoot ? `, as uids ${RAW_UID_FIRST}-${RAW_UID_FIRST + RAW_UIDS - 1} gid ${RAW_GID}` : ''
  console.log(
    `raw baselines launch cordon's own plan (argv checked, same seccomp program) minus the cgroup${asUid}; ` +
      'namespace targets are against the same rlimits and bwrap flags through prlimit (util-linux)',
  )
  console.log(
    `service: createService + its app on a loopback port in this process (concurrency ${CONCURRENCY}, ` +
      `default options); first SSE output: ${FIRST_OUTPUT_RUNS} runs after ${FIRST_OUTPUT_WARMUP} warm-up, ` +
      "the program's CLOCK_REALTIME at its write against this process's on receipt (one host)\n",
  )
  const rows: Row[] = []

  // 1. One `true` in the namespace tier.
  const nsTasks = [
    () => cordonRun(trueCmd, nsOptions),
    () => rawRun(rawNs),
    () => rawRun(rawNsLauncher),
    () => cordonRun(trueCmd, forked(nsOptions)),
  ]
  if (cgroups) nsTasks.push(() => cordonRun(trueCmd, noCgroup(nsOptions)))
  const [ns, nsRaw, nsLauncher, nsForked, nsOff] = await interleavedLatency(
    nsTasks,
    LATENCY_RUNS,
    LATENCY_WARMUP,
  )
  rows.push(...latencyRows('namespace `true` vs prlimit+bwrap', ns!, nsRaw!, 1.0))
  rows.push(...latencyRows('  same, spawner: false (fork of the host):', nsForked!, nsRaw!))
  rows.push(...latencyRows('  raw launcher+bwrap vs prlimit+bwrap:', nsLauncher!, nsRaw!).slice(0, 1))
  rows.push(...latencyRows('  cordon vs raw launcher+bwrap:', ns!, nsLauncher!).slice(0, 1))
  if (nsOff) rows.push(...latencyRows('  cordon cgroup off vs prlimit+bwrap:', nsOff, nsRaw!).slice(0, 1))
  // An occasional caller: every run after 50 ms of quiet (kernel fast paths that back-to-back runs keep warm
  // have gone cold by then, e.g. the RCU sync that moving a process into a cgroup waits for).
  const [nsIdle, nsRawIdle] = await interleavedLatency(
    [() => cordonRun(trueCmd, nsOptions), () => rawRun(rawNs)],
    IDLE_RUNS,
    2,
    IDLE_MS,
  )
  rows.push(...latencyRows(`  runs ${IDLE_MS} ms apart:`, nsIdle!, nsRawIdle!))

  // 1b. A sandbox's warm members (createSandbox({ warm })): the namespace tier made ahead of the run, so a
  // run is its program's exec and its end. Held against a bare fork+exec of the same `true`; the same run
  // cold alongside. Every warm run must have been given a member (a miss would be a cold run).
  const warmBox = createSandbox({ ...nsOptions, warm: WARM_MEMBERS })
  for (let i = 0; i < 1000 && warmBox.stats().warm!.ready < WARM_MEMBERS; i++) await sleep(10)
  const warmRun = async () => {
    const hits = warmBox.stats().warm!.hits
    const result = await warmBox.run(trueCmd)
    if (result.status !== 'ok') throw new Error(`warm run failed: ${result.status}`)
    return warmBox.stats().warm!.hits - hits
  }
  let warmMisses = 0
  const [nsWarm, warmBare, nsCold] = await interleavedLatency(
    [
      async () => {
        warmMisses += 1 - (await warmRun())
      },
      () => spawnPiped('true', [], {}, 'collect'),
      () => cordonRun(trueCmd, nsOptions),
    ],
    LATENCY_RUNS,
    LATENCY_WARMUP,
  )
  for (const [q, target] of [
    ['median', 1.5],
    ['p90', 2.0],
  ] as const) {
    rows.push({
      metric: `namespace \`true\`, warm member vs bare spawn ${q}`,
      cordon: ms(nsWarm![q]),
      baseline: ms(warmBare![q]),
      ratio: nsWarm![q] / warmBare![q],
      target: { op: '<=', value: target },
    })
  }
  rows.push(...latencyRows('  same run cold vs bare spawn:', nsCold!, warmBare!).slice(0, 1))
  rows.push({
    metric: '  warm runs that found no member ready',
    cordon: String(warmMisses),
    baseline: String(LATENCY_RUNS + LATENCY_WARMUP),
    ratio: warmMisses / (LATENCY_RUNS + LATENCY_WARMUP),
  })
  const [tputWarm, tputCold] = await interleavedThroughput(
    [() => warmBox.run(trueCmd), () => cordonRun(trueCmd, nsOptions)],
    THROUGHPUT_RUNS,
  )
  rows.push({
    metric: `  warm runs/s @${CONCURRENCY} vs cold`,
    cordon: perSec(tputWarm!),
    baseline: perSec(tputCold!),
    ratio: tputWarm! / tputCold!,
    target: { op: '>=', value: 1.0 },
  })
  await warmBox.close()

  // 2. One `true` in the process tier against a bare spawn; the raw launcher (same argv) shows the floor.
  const procTasks = [
    () => cordonRun(trueCmd, procOptions),
    () => spawnPiped('true', [], {}, 'collect'),
    () => rawRun(rawProc),
    () => cordonRun(trueCmd, forked(procOptions)),
  ]
  if (cgroups) procTasks.push(() => cordonRun(trueCmd, noCgroup(procOptions)))
  const [proc, bare, procRaw, procForked, procOff] = await interleavedLatency(
    procTasks,
    LATENCY_RUNS,
    LATENCY_WARMUP,
  )
  rows.push(...latencyRows('process `true`', proc!, bare!, 1.2))
  rows.push(...latencyRows('  same, spawner: false (fork of the host):', procForked!, bare!))
  rows.push(...latencyRows('  raw launcher vs bare:', procRaw!, bare!).slice(0, 1))
  rows.push(...latencyRows('  cordon vs raw launcher:', proc!, procRaw!).slice(0, 1))
  if (procOff)
    rows.push(...latencyRows('  cordon cgroup off vs raw launcher:', procOff, procRaw!).slice(0, 1))

  // 3. Throughput at concurrency 16, namespace tier.
  const [tput, tputRaw, tputForked] = await interleavedThroughput(
    [() => cordonRun(trueCmd, nsOptions), () => rawRun(rawNs), () => cordonRun(trueCmd, forked(nsOptions))],
    THROUGHPUT_RUNS,
  )
  for (const [metric, rate, target] of [
    [`namespace runs/s @${CONCURRENCY}`, tput!, 1.0],
    ['  same, spawner: false (fork of the host)', tputForked!, undefined],
  ] as const) {
    rows.push({
      metric,
      cordon: perSec(rate),
      baseline: perSec(tputRaw!),
      ratio: rate / tputRaw!,
      ...(target === undefined ? {} : { target: { op: '>=' as const, value: target } }),
    })
  }

  // 4. 256 MiB through stdout: cordon keeps the text; one bare pipe only counts, one decodes it into a
  // string (StringDecoder and `+=`, the plain way to get what cordon returns). A third only holds on to
  // the chunks it reads, no copy and no decoding: the least any pipe that returns its output can do, so
  // its ratio to counting bounds what keeping 256 MiB costs on this machine (fresh pages, faulted in).
  const outCmd = ['head', '-c', String(OUTPUT_BYTES), '/dev/zero']
  const outOptions: RunOptions = { isolation: 'namespace', limits: { maxOutputBytes: 300 * MiB } }
  const [out, outCount, outDecode, outKeep, outForked] = await interleavedOutput(
    [
      () => cordonRun(outCmd, outOptions, OUTPUT_BYTES),
      () => spawnPiped(outCmd[0]!, outCmd.slice(1), {}, 'count'),
      () => spawnPiped(outCmd[0]!, outCmd.slice(1), {}, 'decode'),
      () => spawnPiped(outCmd[0]!, outCmd.slice(1), {}, 'keep'),
      () => cordonRun(outCmd, forked(outOptions), OUTPUT_BYTES),
    ],
    OUTPUT_ROUNDS,
  )
  for (const [how, base] of [
    ['count', outCount!],
    ['decode to a string', outDecode!],
  ] as const) {
    rows.push({
      metric: `stdout 256 MiB vs bare pipe (${how})`,
      cordon: mibs(out!),
      baseline: mibs(base),
      ratio: out! / base,
      target: { op: '>=', value: 0.85 },
    })
  }
  rows.push({
    metric: '  same, spawner: false (fork of the host), vs counting',
    cordon: mibs(outForked!),
    baseline: mibs(outCount!),
    ratio: outForked! / outCount!,
  })
  rows.push({
    metric: '  bare pipe holding its chunks vs counting',
    cordon: mibs(outKeep!),
    baseline: mibs(outCount!),
    ratio: outKeep! / outCount!,
  })

  // 5. Redaction's cost: the host CPU (this process: reading, decoding, scanning, keeping) of a run printing
  // REDACT_BYTES of text with one literal secret, with one RegExp (case-insensitive, no literal prefix for
  // the engine to skip ahead by: the DFA looks at every character), and without redaction. Rounds rotate.
  const redactCmd = [
    'sh',
    '-c',
    `yes 'the quick brown fox jumps over 13 lazy dogs' | head -c ${REDACT_BYTES}`,
  ]
  const redactOptions = (redact: RunOptions['redact']): RunOptions => ({
    isolation: 'namespace',
    limits: { maxOutputBytes: 2 * REDACT_BYTES, wallTimeMs: '5m', cpuTimeMs: '5m' },
    redact,
  })
  const redactTasks = [[], ['tok-9f8e7d6c5b4a'], [/bearer\s+\S+/i]].map(
    (redact) => () => cordonRun(redactCmd, redactOptions(redact), REDACT_BYTES),
  )
  const hostCpu: number[][] = redactTasks.map(() => [])
  for (let r = 0; r < REDACT_ROUNDS; r++) {
    for (let k = 0; k < redactTasks.length; k++) {
      const t = (r + k) % redactTasks.length
      gc()
      const before = process.cpuUsage()
      await redactTasks[t]!()
      const used = process.cpuUsage(before)
      hostCpu[t]!.push((used.user + used.system) / 1000)
    }
  }
  const [plainCpu, literalCpu, regexCpu] = hostCpu.map((xs) => summarize(xs).median)
  for (const [what, cpu] of [
    ['one literal', literalCpu!],
    ['one RegExp', regexCpu!],
  ] as const) {
    rows.push({
      metric: `${REDACT_BYTES / MiB} MiB text, host CPU, ${what} vs no redaction`,
      cordon: ms(cpu),
      baseline: ms(plainCpu!),
      ratio: cpu / plainCpu!,
    })
  }

  // 6. A host that holds memory: Node's spawn forks the host, so its cost grows with the host's size (page
  // tables to copy); a spawner's fork does not. The same process tier `true`, with HOST_EXTRA more in this
  // process, touched so it is really there.
  const rssBefore = process.memoryUsage().rss
  let ballast: Buffer | null = Buffer.alloc(HOST_EXTRA, 1)
  const [bigBare, bigCordon, bigForked] = await interleavedLatency(
    [
      () => spawnPiped('true', [], {}, 'collect'),
      () => cordonRun(trueCmd, procOptions),
      () => cordonRun(trueCmd, forked(procOptions)),
    ],
    LATENCY_RUNS / 4,
    LATENCY_WARMUP / 4,
  )
  const hostMiB = `+${HOST_EXTRA / MiB} MiB host`
  rows.push(...latencyRows(`process \`true\`, ${hostMiB}:`, bigCordon!, bigBare!).slice(0, 1))
  rows.push(...latencyRows(`  same, spawner: false, ${hostMiB}:`, bigForked!, bigBare!).slice(0, 1))
  rows.push(...latencyRows(`  bare spawn, ${hostMiB} vs without:`, bigBare!, bare!).slice(0, 1))
  if (ballast.at(-1) !== 1) throw new Error('the ballast must stay alive through the runs above')
  // Then it goes: every later run that forks this process (the library's run()) would pay for it too. Its
  // memory is freed by the collection after the one that finds it dead.
  ballast = null
  gc()
  await sleep(0)
  gc()
  if (process.memoryUsage().rss > rssBefore + HOST_EXTRA / 2)
    throw new Error('the ballast must be gone before the next runs')

  // 7. The CLI's start-up: agents start `cordon` once per command. `cordon run -- true` is held against a
  // bare Node's start plus the library's own run of the same command (auto tier, forking the host with
  // `spawner: false`, as the CLI runs its one run), a warm one; and, for what an agent's script could do instead, against a fresh Node importing the library
  // and running it once (whose first run is cold, as the CLI's is).
  const oneLibRun = `import(${JSON.stringify(LIB)}).then((m) => m.run(['true']))`
  const [nodeStart, version, cliRun, libRun, freshLibRun] = await interleavedLatency(
    [
      () => spawnPiped(process.execPath, ['-e', '0'], {}, 'collect'),
      () => spawnPiped(process.execPath, [CLI, '--version'], {}, 'collect'),
      () => spawnPiped(process.execPath, [CLI, 'run', '--', 'true'], {}, 'collect'),
      () => cordonRun(trueCmd, { spawner: false }),
      () => spawnPiped(process.execPath, ['-e', oneLibRun], {}, 'collect'),
    ],
    STARTUP_RUNS,
    STARTUP_WARMUP,
  )
  rows.push(...latencyRows('`cordon --version` vs `node -e 0`', version!, nodeStart!, 1.3).slice(0, 1))
  const startPlusRun = { median: nodeStart!.median + libRun!.median, p90: nodeStart!.p90 + libRun!.p90 }
  rows.push(
    ...latencyRows(
      '`cordon run -- true` vs node start + library run (forked)',
      cliRun!,
      startPlusRun,
      1.3,
    ).slice(0, 1),
  )
  rows.push(
    ...latencyRows('  same, vs a fresh node running the library once', cliRun!, freshLibRun!).slice(0, 1),
  )

  // 8. The HTTP service (createService + the app on loopback, in this process: client and server share
  // its event loop) against the library doing the same, interleaved. The service starts its runs through
  // its own spawner. The targets hold it against run() with `spawner: false`, which forks this process
  // (whose size, grown by the rows above, is in that baseline), as every plain caller's run did before the
  // default spawner; against run() as it is now (the default spawner) the rows show the HTTP layer, queue
  // and store alone.
  const served = await startService(CONCURRENCY)
  const libTasks = [() => cordonRun(trueCmd, { spawner: false }), () => cordonRun(trueCmd, {})]
  const [viaHttp, viaLibForked, viaLib] = await interleavedLatency(
    [() => httpRun(served, trueCmd, true), ...libTasks],
    LATENCY_RUNS,
    LATENCY_WARMUP,
  )
  rows.push(
    ...latencyRows('HTTP POST /v1/runs wait `true` vs run() spawner: false', viaHttp!, viaLibForked!, 1.3),
  )
  rows.push(...latencyRows('  same, vs run():', viaHttp!, viaLib!).slice(0, 1))
  const [httpTput, libForkedTput, libTput] = await interleavedThroughput(
    [() => httpRun(served, trueCmd, true), ...libTasks],
    THROUGHPUT_RUNS,
  )
  rows.push({
    metric: `HTTP runs/s @${CONCURRENCY} vs run() spawner: false @${CONCURRENCY}`,
    cordon: perSec(httpTput!),
    baseline: perSec(libForkedTput!),
    ratio: httpTput! / libForkedTput!,
    target: { op: '>=', value: 0.8 },
  })
  rows.push({
    metric: '  same, vs run()',
    cordon: perSec(httpTput!),
    baseline: perSec(libTput!),
    ratio: httpTput! / libTput!,
  })
  // From the program's write to the first `output` event read here: the program prints the CLOCK_REALTIME
  // it writes at, this process reads its own (timeOrigin + monotonic) on receipt, one host, one clock. It
  // keeps running after the line, so its exit does not flush the output early. Baseline: the first chunk
  // of the same program through the library's start(). The service's worker gathers output for up to 25 ms
  // before it stores an event (OUTPUT_FLUSH_MS in src/service/worker.ts), so a lone line waits that long.
  const [sseFirst, libFirst] = await interleavedFigures(
    [() => sseFirstOutput(served), libFirstOutput],
    FIRST_OUTPUT_RUNS,
    FIRST_OUTPUT_WARMUP,
  )
  await served.close()
  for (const q of ['median', 'p90'] as const) {
    rows.push({
      metric: `first SSE output after the write ${q} vs start()`,
      cordon: ms(sseFirst![q]),
      baseline: ms(libFirst![q]),
      ratio: sseFirst![q] / libFirst![q],
      ...(q === 'median'
        ? { target: { op: '<=' as const, value: 5, absolute: { figure: sseFirst![q], unit: 'ms' } } }
        : {}),
    })
  }

  // 8b. `cordon serve --warm`: the same served run (POST /v1/runs, wait) on a server keeping warm members
  // against one without, interleaved. A run that found no member ready ran cold: counted beside.
  const servedWarm = await startService(CONCURRENCY, WARM_MEMBERS)
  const servedCold = await startService(CONCURRENCY)
  for (let i = 0; i < 1000 && servedWarm.paths().warm === 0; i++) {
    await sleep(20)
    if (i % 10 === 9) await httpRun(servedWarm, trueCmd, true) // until one run has found a member
  }
  const before = servedWarm.paths()
  const [httpWarm, httpCold] = await interleavedLatency(
    [() => httpRun(servedWarm, trueCmd, true), () => httpRun(servedCold, trueCmd, true)],
    LATENCY_RUNS,
    LATENCY_WARMUP,
  )
  const after = servedWarm.paths()
  await servedWarm.close()
  await servedCold.close()
  rows.push(...latencyRows(`HTTP run \`true\`, --warm ${WARM_MEMBERS} vs cold`, httpWarm!, httpCold!))
  rows.push({
    metric: '  served runs on --warm that ran cold (no member ready)',
    cordon: String(after.cold - before.cold),
    baseline: String(after.warm + after.cold - before.warm - before.cold),
    ratio: (after.cold - before.cold) / Math.max(1, after.warm + after.cold - before.warm - before.cold),
  })

  // 9. The WASM face: a host call's round trip through the worker bridge, and an exec through a guest
  // against run() of the same command (bench/wasm.ts).
  rows.push(...(await wasmRows(quick)))

  printTable(rows)

  // Where cordon's per-run time goes outside the launched processes (all on the event loop).
  const calls = quick ? 200 : 1000
  const policy = parsePolicy(nsOptions)
  const steps: [string, number][] = [
    [
      'parse command + policy (zod)',
      microseconds(() => {
        parseCommand(trueCmd)
        parsePolicy(nsOptions)
      }, calls),
    ],
    ['probeCapabilities()', microseconds(() => probeCapabilities(policy.cgroup.parent), calls)],
    [
      'prepare() incl. uid lease + release',
      microseconds(() => {
        const p = prepare(trueCmd, policy, caps)
        if (p.kind === 'launch') {
          p.plan.lease?.release()
          p.plan.pathFds.close()
        }
      }, calls),
    ],
    [`one /proc scan (${listProcesses().length} processes)`, microseconds(() => listProcesses(), calls / 5)],
  ]
  const prepared = prepare(trueCmd, policy, caps)
  if (prepared.kind === 'launch') {
    prepared.plan.lease?.release()
    prepared.plan.pathFds.close()
    const cgroup = prepared.plan.cgroup
    if (cgroup) {
      const started = performance.now()
      for (let i = 0; i < calls / 5; i++)
        await SandboxCgroup.create(
          cgroup.support,
          cgroup.writes,
          cgroupDirs(cgroup.support, sandboxCgroupName()),
        ).remove()
      steps.push(['empty cgroup create + remove', ((performance.now() - started) / (calls / 5)) * 1000])
    }
  }
  console.log('\nsteps cordon takes per run, in-process (mean µs per call):')
  for (const [name, us] of steps) console.log(`  ${name.padEnd(40)} ${us.toFixed(0).padStart(6)} µs`)
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true })
  console.log(`\ntotal ${((performance.now() - benchStarted) / 1000).toFixed(1)} s`)
}

await main()
