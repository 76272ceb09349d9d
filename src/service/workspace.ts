// The runs' workspaces under <data dir>/work/, each bounded in size, so that no run can fill the data
// dir's filesystem (the store's with it: every other tenant's request would fail for that run's wall time).
// - As root, a workspace lives on a size-limited tmpfs of its own (a slot: mounted once, reused run after
//   run), and the kernel bounds it: a write past it is an ordinary ENOSPC, as on a full /tmp. Its pages
//   are RAM charged to the writer's memory cgroup, so a run's files also count against its memoryBytes.
// - Not as root nothing can be mounted: the workspace is a plain directory, measured (`du`, in a process
//   of its own, which no link, swap or shut directory can steer out of it) while the run runs, and the run
//   is stopped once it is past the quota.
// A workspace goes only once its sandbox is gone; otherwise (never, by design) by a lazy unmount or the
// fd-relative remover, neither of which a live sandbox can steer.
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { removeWrittenTree } from '../index.js'

export interface WorkspacesOptions {
  dataDir: string
  /** Bytes one workspace may hold at most. */
  maxBytes: number
  /** Mount a tmpfs per slot (default: when root); when it cannot, workspaces are measured instead. */
  mount?: boolean
  /** Told when mounting was meant but failed (the workspaces are then measured). */
  onMountFailed?: (error: Error) => void
}

/** One run's workspace. */
export interface Workspace {
  readonly dir: string
  /** How its size is held: by the kernel (a tmpfs), or by measuring it while the run runs. */
  readonly bound: 'tmpfs' | 'measured'
  /**
   * Measure it every so often while the run runs (measured workspaces only): `onOver` is called once it
   * holds more than the quota, or cannot be measured. Returns the stop.
   */
  watch(onOver: (why: string) => void): () => void
  /** Removes it. `sandboxGone`: the run's result has come, so nothing of its sandbox can race the removal. */
  release(sandboxGone: boolean): Promise<void>
}

/** The first and the longest wait between two measures of a workspace (twice what one took, between). */
const MEASURE_MS = { least: 250, most: 5000 }
/** A measure taking longer than this counts as over the quota: a tree too big to measure in time. */
const MEASURE_TIMEOUT_MS = 30_000

/** Inodes of a tmpfs workspace: one per 4 KiB of its size (a tree of empty files is bounded too). */
export const inodesFor = (bytes: number) => Math.max(1024, Math.floor(bytes / 4096))

/** A process's outcome: its exit code (null: killed or never ran) and what it printed. */
function runProgram(
  file: string,
  args: string[],
  timeoutMs = MEASURE_TIMEOUT_MS,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      if (stdout.length < 4096) stdout += s
    })
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      if (stderr.length < 4096) stderr += s
    })
    child.once('error', (error) => resolve({ code: null, stdout, stderr: error.message }))
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** Mount points at or below `dir` (absolute, real), deepest first, from this process's mountinfo. */
export function mountsUnder(dir: string): string[] {
  let info: string
  try {
    info = readFileSync('/proc/self/mountinfo', 'utf8')
  } catch {
    return []
  }
  // The mount point is the 5th field, with space, tab, newline and backslash as octal escapes.
  const unescaped = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)))
  return info
    .split('\n')
    .map((line) => unescaped(line.split(' ')[4] ?? ''))
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

async function unmount(dir: string): Promise<void> {
  // Lazily: detached at once, whoever still has it open; nothing below it is walked.
  const out = await runProgram('umount', ['-l', '--', dir])
  if (out.code !== 0) throw new Error(`umount ${dir}: ${out.stderr.trim() || `exit ${out.code}`}`)
}

export class Workspaces {
  readonly work: string
  /** Bytes one workspace may hold at most. */
  readonly maxBytes: number
  private mounting: boolean
  private readonly free: string[] = []
  private readonly slots = new Set<string>()
  private next = 0

  private constructor(options: WorkspacesOptions, mounting: boolean) {
    this.work = path.join(options.dataDir, 'work')
    this.maxBytes = options.maxBytes
    this.mounting = mounting
  }

  /**
   * Opens work/ for a server starting on `dataDir`: what a dead server left is removed first (its slots
   * unmounted lazily, the rest by the fd-relative remover), then, as root, a first slot is mounted, which
   * says whether this machine lets the server mount (a container without CAP_SYS_ADMIN does not: the
   * workspaces are then measured, and `onMountFailed` says why).
   */
  static async open(options: WorkspacesOptions): Promise<Workspaces> {
    const asRoot = process.getuid?.() === 0
    const spaces = new Workspaces(options, options.mount ?? asRoot)
    await spaces.sweep(asRoot)
    mkdirSync(spaces.work, { recursive: true, mode: 0o700 })
    if (spaces.mounting) {
      try {
        spaces.free.push(await spaces.mountSlot())
      } catch (error) {
        spaces.mounting = false
        options.onMountFailed?.(error as Error)
      }
    }
    return spaces
  }

  get bound(): 'tmpfs' | 'measured' {
    return this.mounting ? 'tmpfs' : 'measured'
  }

  /** A fresh, empty workspace for `runId`, which every sandbox uid may write. */
  async acquire(runId: string): Promise<Workspace> {
    if (!this.mounting) {
      const dir = path.join(this.work, runId)
      if (existsSync(dir)) await removeWrittenTree(dir) // a leftover of a crash
      makeOpen(dir)
      return this.measured(dir)
    }
    const slot = this.free.pop() ?? (await this.mountSlot())
    const dir = path.join(slot, runId)
    try {
      makeOpen(dir)
    } catch (error) {
      await this.retire(slot)
      throw error
    }
    return {
      dir,
      bound: 'tmpfs',
      watch: () => () => {},
      release: async (sandboxGone) => {
        if (sandboxGone) {
          try {
            await rm(dir, { recursive: true, force: true })
          } catch {
            await removeWrittenTree(dir, { anyOwner: true }) // deeper than a path can name
          }
          if (readdirSync(slot).length === 0) {
            this.free.push(slot)
            return
          }
        }
        // Not provably gone, or not emptied: the whole tmpfs goes, lazily, walked by nobody.
        await this.retire(slot)
      },
    }
  }

  /** Unmounts every slot (the runs are over). */
  async close(): Promise<void> {
    for (const slot of [...this.slots]) await this.retire(slot)
  }

  private measured(dir: string): Workspace {
    const quota = this.maxBytes
    return {
      dir,
      bound: 'measured',
      watch: (onOver) => {
        let stopped = false
        let timer: NodeJS.Timeout | undefined
        let wait = MEASURE_MS.least
        const measure = async () => {
          const started = Date.now()
          const why = await overQuota(dir, quota)
          if (stopped) return
          if (why !== null) {
            onOver(why)
            return
          }
          wait = Math.min(MEASURE_MS.most, Math.max(MEASURE_MS.least, 2 * (Date.now() - started)))
          timer = setTimeout(measure, wait)
        }
        timer = setTimeout(measure, wait)
        return () => {
          stopped = true
          clearTimeout(timer)
        }
      },
      // Not as root the sandbox had the server's uid: by fd, always (it also opens what the sandbox shut).
      release: () => removeWrittenTree(dir),
    }
  }

  private async mountSlot(): Promise<string> {
    const slot = path.join(this.work, `slot-${this.next++}`)
    mkdirSync(slot, { mode: 0o700 })
    const size = Math.max(4096, this.maxBytes)
    // 0700 root: a sandbox reaches its own workspace only (handed in by fd), never a sibling.
    const out = await runProgram('mount', [
      '-t',
      'tmpfs',
      '-o',
      `size=${size},nr_inodes=${inodesFor(size)},mode=0700,nosuid,nodev`,
      'cordon-workspace',
      slot,
    ])
    if (out.code !== 0) {
      rmdirSync(slot)
      throw new Error(`mount tmpfs on ${slot}: ${out.stderr.trim() || `exit ${out.code}`}`)
    }
    this.slots.add(slot)
    return slot
  }

  private async retire(slot: string): Promise<void> {
    this.slots.delete(slot)
    const i = this.free.indexOf(slot)
    if (i >= 0) this.free.splice(i, 1)
    try {
      await unmount(slot)
      rmdirSync(slot)
    } catch {
      // the next start sweeps work/ again
    }
  }

  /** What a dead server left in work/: its slots unmounted, then the rest by the fd-relative remover. */
  private async sweep(asRoot: boolean): Promise<void> {
    if (!existsSync(this.work)) return
    if (asRoot) for (const point of mountsUnder(this.work)) await unmount(point).catch(() => undefined)
    // As root any owner's (the pool uids'), by fd: never into another filesystem, never through a link.
    await removeWrittenTree(this.work, { anyOwner: asRoot })
  }
}

/** A directory any sandbox uid may write: as root its uid comes from the pool, unknown until launch. */
function makeOpen(dir: string): void {
  mkdirSync(dir, { mode: 0o777 })
  chmodSync(dir, 0o777)
}

/**
 * Why `dir` is past `quota` bytes (allocated, hard links once, directories included, this filesystem
 * only), or null while it is not. `du` walks it in a process of its own, by fd and without following a
 * link, so the server's thread never waits on a tree the sandbox made as large as it liked; a tree it
 * cannot measure whole (a directory the sandbox shut, one too big to walk in 30 s) counts as over, since
 * what it hides could be anything.
 */
async function overQuota(dir: string, quota: number): Promise<string | null> {
  const out = await runProgram('du', ['-s', '-x', '--block-size=1', '--', dir])
  const bytes = Number.parseInt(out.stdout, 10)
  if (out.code === 0 && Number.isSafeInteger(bytes)) return bytes > quota ? `it holds ${bytes} bytes` : null
  if (!existsSync(dir)) return null // removed meanwhile: the run is over
  return out.code === null
    ? `it could not be measured within ${MEASURE_TIMEOUT_MS / 1000} s`
    : 'it could not be measured whole (a directory its sandbox shut?)'
}
