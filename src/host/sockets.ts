// The host's pathname unix sockets, which a sandbox could connect to through the read-only root: a
// read-only bind does not stop a connect, and a network namespace does not either (pathname sockets are
// found by their inode, in any namespace). The namespace tier covers each one it would show (bwrap.ts).
import { lstatSync, readFileSync, realpathSync } from 'node:fs'
import path from 'node:path'
import { monotonicMs } from '../lazy.js'

/** /proc/net/unix's Flags for a listening socket (__SO_ACCEPTCON). */
const LISTENING = '00010000'
/** /proc/net/unix's Type for SOCK_DGRAM: a bound one takes datagrams from anyone who may write its inode. */
const DATAGRAM = '0002'

/**
 * Paths of the bound pathname sockets in /proc/net/unix's text that someone could connect or send to:
 * listening ones (stream, seqpacket) and datagram ones. Abstract ones (`@…`) belong to the network
 * namespace, which the sandbox leaves; relative ones (bound by a relative name) cannot be placed and are
 * left out. Each path once, as listed (it may go through symlinks).
 */
export function boundSockets(procNetUnix: string): string[] {
  const out = new Set<string>()
  for (const line of procNetUnix.split('\n')) {
    // Num: RefCount Protocol Flags Type St Inode Path — the path is the rest of the line, spaces included.
    // The Inode column is padded (`03    44`): fields are split on runs of spaces, the path follows one.
    const m = /^\s*[0-9a-f]+: +\S+ +\S+ +(\S+) +(\S+) +\S+ +\S+ (\/.*)$/.exec(line)
    if (m && (m[1] === LISTENING || m[2] === DATAGRAM)) out.add(m[3]!)
  }
  return [...out]
}

/**
 * The real paths of the host's bound pathname sockets, read afresh. Only a path that is a socket itself
 * counts: its directory is resolved, its last component never followed, or a sandbox that listens on a
 * name and then puts a symlink there would have every later run lose the file it points at.
 */
export function hostSockets(): string[] {
  let text: string
  try {
    text = readFileSync('/proc/net/unix', 'utf8')
  } catch {
    return []
  }
  const out = new Set<string>()
  // Sockets crowd into few directories (/run/user/N, /var/lib/x): each one resolved once.
  const dirs = new Map<string, string | null>()
  for (const p of boundSockets(text)) {
    const name = path.basename(p)
    if (name === '' || name === '.' || name === '..') continue
    const dir = path.dirname(p)
    let realDir = dirs.get(dir)
    if (realDir === undefined) {
      try {
        realDir = realpathSync(dir)
      } catch {
        realDir = null // gone, or in a directory cordon cannot search: nothing to cover by this name
      }
      dirs.set(dir, realDir)
    }
    if (realDir === null) continue
    const real = path.join(realDir, name)
    if (isSocket(real)) out.add(real)
  }
  return [...out]
}

/**
 * Whether `real` is (still) a socket: asked per run of the few sockets a sandbox would see. One in a
 * directory cordon cannot search (another user's 0700 directory: EACCES) is out of its sandboxes' reach
 * too, so not one to cover.
 */
export function isSocket(real: string): boolean {
  try {
    return lstatSync(real, { throwIfNoEntry: false })?.isSocket() ?? false
  } catch {
    return false
  }
}

/**
 * How long a listing is reused by runs. /proc/net/unix costs ~30 µs on a quiet host, but its kernel side
 * and the stat per socket grow with the sockets: 2000 listening ones cost ~10 ms to read and ~100 ms to
 * check on this (busy) machine. A socket bound less than this before a run, like one bound after it
 * started, is not covered; one gone since is left out by each run (`isSocket`, asked only of the few the
 * sandbox would see), so a run does not fail on it.
 */
export const SOCKETS_TTL_MS = 1000
let recent: { at: number; sockets: readonly string[] } | null = null

/** `hostSockets()`, reused for up to SOCKETS_TTL_MS: a fact of the host, not of a run. */
export function recentHostSockets(): readonly string[] {
  const now = monotonicMs()
  if (!recent || now - recent.at >= SOCKETS_TTL_MS) recent = { at: now, sockets: hostSockets() }
  return recent.sockets
}

/** Drop the listing kept: the next run reads the host's sockets afresh (one just found gone, say). */
export function forgetHostSockets(): void {
  recent = null
}
