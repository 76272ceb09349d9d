// The process tier's private TMPDIR (also its HOME). As root it is a tmpfs in the sandbox's own mount
// namespace (see processMounts): nothing of it is on the host, so there is nothing to remove. Not as root
// it is a directory under the host's TMPDIR, which the sandbox (of cordon's own uid) may have filled and
// rearranged: it is removed by the launcher's fd-relative, no-follow remover, never by a path walk.
import { spawn } from 'node:child_process'
import { lstatSync, rmdirSync } from 'node:fs'
import path from 'node:path'
import { LAUNCHER_PATH } from './native.js'
import { staleEntries } from './stale.js'

/** Not as root: `<prefix><owner pid>-<uuid>` under the host's TMPDIR, so the next cordon finds a dead owner's. */
export const SCRATCH_PREFIX = 'cordon-tmp-'

/**
 * Remove `dir` and all beneath it with `cordon-launch --remove-tree`: it opens each level by fd with
 * O_NOFOLLOW, never follows a symlink or leaves the filesystem, and removes only a directory of cordon's
 * own uid. A path-based walk (Node's `rm -r`) can be steered by a sandbox that swaps a directory for a
 * symlink mid-walk into deleting outside its write area. Never rejects: what cannot go stays.
 */
export function removeTree(launcher: string, dir: string, anyOwner = false): Promise<void> {
  return new Promise((resolve) => {
    const remover = spawn(launcher, [`--remove-tree${anyOwner ? '-any' : ''}=${dir}`], { stdio: 'ignore' })
    remover.once('error', () => resolve())
    remover.once('close', () => resolve())
  })
}

/**
 * Remove `dir` (absolute) and all beneath it, as a sandbox may have left it, with cordon's own launcher
 * (see removeTree): for a face that gives sandboxes a directory to write in. Not as root the sandbox had
 * cordon's own uid; as root (`anyOwner`, `--remove-tree-any`) its pool uid, whose directories root walks
 * too: call it only once nothing of that sandbox runs. By fd either way, so a tree nested past PATH_MAX goes as well.
 */
export function removeWrittenTree(
  dir: string,
  { anyOwner = process.getuid?.() === 0 }: { anyOwner?: boolean } = {},
): Promise<void> {
  return removeTree(LAUNCHER_PATH, dir, anyOwner)
}

/**
 * Remove a run's private TMPDIR: one rmdir when it is empty or was never made, the remover otherwise (a
 * tree, or a symlink a sandbox swapped in for it).
 */
export async function releaseScratch(launcher: string, dir: string): Promise<void> {
  try {
    rmdirSync(dir)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOTEMPTY' || code === 'ENOTDIR') await removeTree(launcher, dir)
  }
}

/**
 * Remove the directories under `parent` named `<prefix><owner pid>-…` whose owning cordon process is dead
 * (at most once per 10 s per `throttle`): only entries of cordon's own uid, with the no-follow remover, in
 * the background. Private TMPDIRs and the network proxies' socket directories are swept so.
 */
export function sweepStaleDirs(
  launcher: string,
  parent: string,
  prefix: string,
  throttle?: Map<string, number>,
): void {
  const own = process.getuid?.()
  for (const name of staleEntries(parent, prefix, throttle)) {
    const dir = path.join(parent, name)
    if (lstatSync(dir, { throwIfNoEntry: false })?.uid === own) void removeTree(launcher, dir)
  }
}

/** The private TMPDIRs of dead cordon processes under `parent` (see sweepStaleDirs). */
export function sweepStaleScratch(launcher: string, parent: string, throttle?: Map<string, number>): void {
  sweepStaleDirs(launcher, parent, SCRATCH_PREFIX, throttle)
}
