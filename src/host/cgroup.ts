// One cgroup per sandbox: created before launch, joined by the launcher before anything else runs, read for
// exact figures, killed as a whole, and always removed.
import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmdir,
  rmdirSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import {
  type CgroupUsage,
  type CgroupVersion,
  type CgroupWrite,
  cpuUsageMs,
  parseUsage,
  usageFiles,
} from './cgroup-files.js'
import { CGROUP_PREFIX, type CgroupController, type CgroupSupport } from './cgroups.js'
import { preadSmall } from './pread.js'
import { inCgroup, type ProcInfo, readProc, signalFound } from './procs.js'
import { staleEntries } from './stale.js'

// fs/promises would load ~2 ms of modules at every CLI start for this one call.
const removeDir = promisify(rmdir)

function tryRead(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
}

/** The pids in a cgroup directory's cgroup.procs (none when it is gone). */
function readPids(dir: string | undefined): number[] {
  const text = dir === undefined ? undefined : tryRead(path.join(dir, 'cgroup.procs'))
  return (text ?? '').split('\n').filter(Boolean).map(Number)
}

/** The living processes listed in a cgroup directory, with their start times (see signalFound). */
function livingIn(dir: string | undefined): ProcInfo[] {
  const out: ProcInfo[] = []
  for (const pid of readPids(dir)) {
    const info = readProc(pid, -1)
    if (info && !info.zombie) out.push(info)
  }
  return out
}

/** SIGKILL what `dir` lists, each only while it is still in that cgroup (named by the directory). */
function killListed(dir: string | undefined, found: readonly ProcInfo[]): void {
  if (dir === undefined) return
  const name = path.basename(dir)
  signalFound(found, 'SIGKILL', (now) => inCgroup(now.pid, name))
}

/** Whether anyone is inside: v2 says so in cgroup.events, v1 counts tasks in pids.current. */
const COUNT_V2 = { controller: 'unified', file: 'cgroup.events' } as const
const COUNT_V1 = { controller: 'pids', file: 'pids.current' } as const
/** Kill passes over the member list when the kernel has no cgroup.kill (see `kill`). */
const KILL_PASSES = 3

export class SandboxCgroup {
  private readonly dirs = new Map<CgroupController, string>()
  /** Files opened by `keepOpen`, by path. */
  private readonly kept = new Map<string, number>()
  /** CPU time (ms) spent before the run began (a warm member's own set-up; see startRun). */
  private cpuBefore = 0

  private constructor(readonly version: CgroupVersion) {}

  /** Create the sandbox's cgroup directories (from `cgroupDirs`) and apply `writes`. */
  static create(
    support: Exclude<CgroupSupport, { version: null }>,
    writes: CgroupWrite[],
    planned: ReadonlyMap<CgroupController, string>,
  ): SandboxCgroup {
    const cgroup = new SandboxCgroup(support.version)
    try {
      for (const [controller, dir] of planned) {
        sweepStale(path.dirname(dir))
        mkdirSync(dir)
        cgroup.dirs.set(controller, dir)
      }
      cgroup.apply(writes)
    } catch (error) {
      cgroup.removeNow()
      throw error
    }
    return cgroup
  }

  /** A warm member's run's limits, written before its program starts (see apply). */
  limit(writes: readonly CgroupWrite[]): void {
    this.apply(writes)
  }

  /**
   * The run begins now in a cgroup that held a warm member's set-up: its CPU time counts from here, and its
   * peak memory from what is in use now (v1: max_usage_in_bytes reset; v2: memory.peak reset for the reads
   * through one fd, Linux 6.12, else the peak may include the set-up, a few MB at most).
   */
  startRun(): void {
    this.cpuBefore = this.cpuMsSinceCreate() ?? 0
    if (this.version === 1) {
      writeFileSync(this.path('memory', 'memory.max_usage_in_bytes')!, '0')
      return
    }
    const peak = this.path('unified', 'memory.peak')!
    let fd: number | undefined
    try {
      fd = openSync(peak, 'r+')
      writeSync(fd, 'reset\n')
      this.kept.set(peak, fd)
    } catch {
      if (fd !== undefined) closeSync(fd)
    }
  }

  /** Write limits; the first refused write throws. Files a kernel lacks (memsw without swap accounting) are skipped. */
  private apply(writes: readonly CgroupWrite[]): void {
    for (const w of writes) {
      try {
        writeFileSync(path.join(this.dirs.get(w.controller)!, w.file), w.value)
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (!(code === 'ENOENT' && /swap|memsw|oom\.group/.test(w.file))) throw error
      }
    }
  }

  private path(controller: CgroupController, file: string): string | undefined {
    const dir = this.dirs.get(this.version === 2 ? 'unified' : controller)
    return dir && path.join(dir, file)
  }

  private file(controller: CgroupController, file: string): string | undefined {
    const at = this.path(controller, file)
    if (at === undefined) return undefined
    const fd = this.kept.get(at)
    return (fd !== undefined && preadSmall(fd)) || tryRead(at)
  }

  /**
   * Open every file read during and at the end of the run. Called while the sandbox runs: the end of a
   * run is on the caller's critical path, and a read through a kept fd is one pread instead of four calls.
   */
  keepOpen(): void {
    const counter = this.version === 2 ? COUNT_V2 : COUNT_V1
    for (const { controller, file } of [...usageFiles(this.version), counter]) {
      const at = this.path(controller, file)
      if (at === undefined || this.kept.has(at)) continue
      try {
        this.kept.set(at, openSync(at, 'r'))
      } catch {
        // Read by name later, as without keepOpen.
      }
    }
  }

  /** CPU time of the run so far (ms). */
  cpuMs(): number | null {
    const ms = this.cpuMsSinceCreate()
    return ms === null ? null : Math.max(0, ms - this.cpuBefore)
  }

  private cpuMsSinceCreate(): number | null {
    const text = this.version === 2 ? this.file('unified', 'cpu.stat') : this.file('cpuacct', 'cpuacct.usage')
    return text === undefined ? null : cpuUsageMs(this.version, text)
  }

  usage(): CgroupUsage {
    const files: Record<string, string | undefined> = {}
    for (const { controller, file } of usageFiles(this.version)) files[file] = this.file(controller, file)
    const usage = parseUsage(this.version, files)
    if (usage.cpuMs === null || this.cpuBefore === 0) return usage
    return { ...usage, cpuMs: Math.max(0, Math.round(this.cpuMsSinceCreate()! - this.cpuBefore)) }
  }

  /** The directory whose member list is read: every v1 hierarchy holds the same processes; memory is always there. */
  private get listed(): string | undefined {
    return this.dirs.get(this.version === 2 ? 'unified' : 'memory')
  }

  /** The living processes inside, each with its start time. */
  members(): ProcInfo[] {
    // Counting is cheap and listing is not (v1 builds a sorted pid list on every read): list only when
    // the count says someone is there (zombies are counted, not listed: then the list is read, empty).
    const empty =
      this.version === 2
        ? /^populated 0$/m.test(this.file(COUNT_V2.controller, COUNT_V2.file) ?? '')
        : this.file(COUNT_V1.controller, COUNT_V1.file)?.trim() === '0'
    return empty ? [] : livingIn(this.listed)
  }

  pids(): number[] {
    return this.members().map((p) => p.pid)
  }

  /**
   * SIGKILL everything inside. v2 does it atomically. On v1 a pass kills every member listed; a child
   * forked meanwhile is inside too and is found by the next pass. The passes converge (a killed process
   * forks no more, pids.max bounds the tree) and `reap` goes on where these stop. A freezer would make one
   * pass enough, at the cost of a fourth hierarchy to make, join and remove in every run.
   */
  kill(): void {
    if (this.version === 2) {
      try {
        writeFileSync(path.join(this.dirs.get('unified')!, 'cgroup.kill'), '1')
        return
      } catch {
        // cgroup.kill needs Linux 5.14; below that, kill passes as on v1.
      }
    }
    for (let pass = 0; pass < KILL_PASSES; pass++) {
      const found = this.members()
      if (found.length === 0) return
      killListed(this.listed, found)
    }
  }

  /** Remove the cgroup, retrying while the last processes finish exiting. */
  async remove(): Promise<void> {
    // Usually empty by now: removing at once (~80 µs) beats three trips through the thread pool.
    this.removeNow()
    for (let attempt = 0; attempt < 100 && this.dirs.size > 0; attempt++) {
      await new Promise((r) => setTimeout(r, 10))
      await Promise.all(
        [...this.dirs].map(([controller, dir]) =>
          removeDir(dir).then(
            () => this.dirs.delete(controller),
            (error: NodeJS.ErrnoException) => error.code === 'ENOENT' && this.dirs.delete(controller),
          ),
        ),
      )
    }
  }

  private removeNow(): void {
    for (const fd of this.kept.values()) closeSync(fd)
    this.kept.clear()
    for (const [controller, dir] of this.dirs) {
      try {
        rmdirSync(dir)
        this.dirs.delete(controller)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') this.dirs.delete(controller)
      }
    }
  }
}

/** Remove cgroups left by a cordon process that died (its pid is in the name), killing what is inside. */
function sweepStale(parent: string): void {
  for (const name of staleEntries(parent, CGROUP_PREFIX)) {
    const dir = path.join(parent, name)
    killListed(dir, livingIn(dir))
    try {
      rmdirSync(dir)
    } catch {
      // Still emptying; the next sweep takes it.
    }
  }
}
