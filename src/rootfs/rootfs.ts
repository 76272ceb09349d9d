// Alternate root filesystems: a directory (a debootstrap tree, an exported container image) that the
// sandbox sees as /, read-only. Named ones live in a cache directory and are built from Debian packages.
import { spawn } from 'node:child_process'
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { CordonError, PolicyError } from '../errors.js'

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
/** NAME is built in NAME.partial, which a failed or interrupted build leaves and the next one removes. */
const PARTIAL = '.partial'

/** A name a tree in the cache may have: never a path, never the place another name is built in. */
function isName(name: string): boolean {
  return NAME_RE.test(name) && !name.endsWith(PARTIAL)
}

/**
 * A root filesystem could not be built, by the machine's doing: debootstrap is not installed, or it failed
 * (no network, a package that does not exist). Thrown, not returned: a management call has no result to
 * say it in, unlike a run. What the caller got wrong (a bad name, an existing tree) is a PolicyError.
 */
export class RootfsError extends CordonError {
  override readonly name = 'RootfsError'
  constructor(
    message: string,
    readonly code: 'debootstrap-missing' | 'debootstrap-failed',
  ) {
    super(message)
  }
}

/** Where named root filesystems are kept: $CORDON_ROOTFS_CACHE, else a system or per-user cache. */
export function rootfsCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CORDON_ROOTFS_CACHE) return path.resolve(env.CORDON_ROOTFS_CACHE)
  return process.getuid?.() === 0
    ? '/var/cache/cordon/rootfs'
    : path.join(os.homedir(), '.cache/cordon/rootfs')
}

/** A top-level entry of a root filesystem, as the sandbox's / is assembled from them. */
export interface RootEntry {
  name: string
  /** A directory is bound read-only; a symlink (merged /usr: /bin -> usr/bin) is recreated as is. */
  symlink: string | null
}

export interface Rootfs {
  dir: string
  entries: RootEntry[]
}

/** Names the sandbox gets fresh (private /dev, /proc, /tmp) or never needs from the tree. */
const PRIVATE_TOP = new Set(['dev', 'proc', 'tmp', 'sys', 'lost+found'])

/** NAME (from the cache) or a directory path → the tree and its top-level entries. */
export function resolveRootfs(spec: string, cacheDir = rootfsCacheDir()): Rootfs {
  const dir = spec.includes('/') ? path.resolve(spec) : path.join(cacheDir, spec)
  if (!spec.includes('/') && !isName(spec))
    throw new PolicyError('rootfs', `"${spec}" is not a name or a path`)
  let isDir = false
  try {
    isDir = statSync(dir).isDirectory()
  } catch {
    // reported below
  }
  if (!isDir || !existsSync(path.join(dir, 'usr'))) {
    const hint = spec.includes('/') ? '' : ` (build it: cordon rootfs create ${spec})`
    throw new PolicyError('rootfs', `${dir} is not a root filesystem (no usr/)${hint}`)
  }
  const entries: RootEntry[] = []
  for (const name of readdirSync(dir).sort()) {
    if (PRIVATE_TOP.has(name)) continue
    const st = lstatSync(path.join(dir, name))
    if (st.isSymbolicLink()) entries.push({ name, symlink: readlinkSync(path.join(dir, name)) })
    else if (st.isDirectory()) entries.push({ name, symlink: null })
  }
  return { dir, entries }
}

export interface RootfsInfo {
  name: string
  dir: string
  /** PRETTY_NAME from its os-release, when it has one. */
  os: string | null
}

export function listRootfs(cacheDir = rootfsCacheDir()): RootfsInfo[] {
  let names: string[] = []
  try {
    names = readdirSync(cacheDir).filter(isName)
  } catch {
    return []
  }
  return names.sort().map((name) => {
    const dir = path.join(cacheDir, name)
    let osName: string | null = null
    for (const file of ['etc/os-release', 'usr/lib/os-release']) {
      try {
        osName = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(readFileSync(path.join(dir, file), 'utf8'))?.[1] ?? null
        break
      } catch {
        // try the next
      }
    }
    return { name, dir, os: osName }
  })
}

/** The host's own Debian suite and mirror, the natural defaults for a new tree. */
function hostDebian(): { suite: string; mirror: string } {
  let suite = 'bookworm'
  let mirror = 'http://deb.debian.org/debian'
  try {
    suite = /^VERSION_CODENAME=(\S+)$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? suite
  } catch {
    // keep the default
  }
  for (const file of ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list']) {
    try {
      const text = readFileSync(file, 'utf8')
      const found = /^URIs:\s*(\S+\/debian)\s*$/m.exec(text)?.[1] ?? /^deb\s+(\S+\/debian)\s/m.exec(text)?.[1]
      if (found) {
        mirror = found
        break
      }
    } catch {
      // try the next
    }
  }
  return { suite, mirror }
}

export interface CreateRootfsOptions {
  packages?: readonly string[]
  cacheDir?: string
  suite?: string
  mirror?: string
  /** Where debootstrap's progress goes. */
  log?: (line: string) => void
}

/** Build NAME with debootstrap (minbase plus `packages`) into the cache; atomic: a failed build leaves nothing. */
export async function createRootfs(name: string, options: CreateRootfsOptions = {}): Promise<RootfsInfo> {
  if (!isName(name)) {
    throw new PolicyError('name', `"${name}" must be letters, digits, . _ - (not ending in ${PARTIAL})`)
  }
  for (const [i, pkg] of (options.packages ?? []).entries()) {
    if (!/^[a-z0-9][a-z0-9+.-]+$/.test(pkg))
      throw new PolicyError(`packages.${i}`, `"${pkg}" is not a Debian package name`)
  }
  const cacheDir = options.cacheDir ?? rootfsCacheDir()
  const dir = path.join(cacheDir, name)
  if (existsSync(dir)) throw new PolicyError('name', `${dir} already exists`)
  const partial = `${dir}${PARTIAL}`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(cacheDir, { recursive: true })
  const host = hostDebian()
  const args = ['--variant=minbase']
  if (options.packages?.length) args.push(`--include=${options.packages.join(',')}`)
  args.push(options.suite ?? host.suite, partial, options.mirror ?? host.mirror)
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn('debootstrap', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    for (const stream of [child.stdout, child.stderr]) {
      stream.setEncoding('utf8')
      stream.on('data', (text: string) => {
        for (const line of text.split('\n')) if (line) options.log?.(line)
      })
    }
    child.on('error', (error) =>
      reject(
        new RootfsError(
          `could not run debootstrap (apt-get install -y debootstrap): ${error.message}`,
          'debootstrap-missing',
        ),
      ),
    )
    child.on('close', (c) => resolve(c ?? 1))
  })
  if (code !== 0) {
    rmSync(partial, { recursive: true, force: true })
    throw new RootfsError(`debootstrap failed with exit code ${code}`, 'debootstrap-failed')
  }
  renameSync(partial, dir)
  return listRootfs(cacheDir).find((r) => r.name === name)!
}

/** Remove the named tree from the cache (never a path: only what `create` made can be deleted by name). */
export function deleteRootfs(name: string, cacheDir = rootfsCacheDir()): void {
  if (!isName(name)) throw new PolicyError('name', `"${name}" is not a root filesystem name`)
  const dir = path.join(cacheDir, name)
  const st = lstatSync(dir, { throwIfNoEntry: false })
  if (!st?.isDirectory() || !existsSync(path.join(dir, 'usr')))
    throw new PolicyError('name', `${name} is not a root filesystem in ${cacheDir} (cordon rootfs list)`)
  rmSync(dir, { recursive: true, force: true })
}
