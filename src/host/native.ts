// cordon's native helpers, where `npm run build` (native/build.sh) puts them: the same place from src/ and
// from dist/ (both one folder below the package root, as is the CLI's bundle in dist/cli/).
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const native = (name: string) => fileURLToPath(new URL(`../../native/${name}`, import.meta.url))

/** The launcher both tiers start through (native/launch.c). */
export const LAUNCHER_PATH = native('cordon-launch')
/** The network bridge a sandbox with an allowlist runs first (native/bridge.c). */
export const BRIDGE_PATH = native('cordon-bridge')
/** The spawner, a small process that forks sandboxes instead of the host (native/spawner.c). */
export const SPAWNER_PATH = native('cordon-spawner')
/** A warm member's last step: it waits for its run's activation record, then executes the program (native/await.c). */
export const AWAITER_PATH = native('cordon-await')

const abis = new Map<string, number>()

/** The kernel's Landlock ABI version (0: none), asked once per launcher: it changes only with a reboot. */
export function landlockAbi(launcher: string): number {
  let abi = abis.get(launcher)
  if (abi === undefined) {
    const out = spawnSync(launcher, ['--landlock-abi'], { encoding: 'utf8', timeout: 5000 })
    abi = out.status === 0 ? Number.parseInt(out.stdout, 10) || 0 : 0
    abis.set(launcher, abi)
  }
  return abi
}
