// Holding a namespace-tier sandbox until it is inside its cgroup (v2; on v1 bwrap is born inside, see
// SandboxCgroup.spawnInside; the process tier's launcher joins by itself): no program code runs before.
import type { Readable, Writable } from 'node:stream'
import type { SandboxCgroup } from './cgroup.js'

/** Call `onInit` with the host pid of bwrap's init, which bwrap writes to the info fd as JSON. */
export function watchInit(info: Readable | undefined, onInit: (pid: number) => void): void {
  let text = ''
  info?.setEncoding('utf8')
  info?.on('data', function onInfo(chunk: string) {
    text += chunk
    const match = /"child-pid"\s*:\s*(\d+)/.exec(text)
    if (!match) return
    info.off('data', onInfo)
    info.resume()
    onInit(Number(match[1]))
  })
}

/**
 * Move the held sandbox into its cgroup, then let it go by writing to `gate`. Only the one process that
 * will fork the program is moved (each move may wait out an RCU grace period): bwrap's init, held on the
 * block fd. Until then no program code has run. bwrap's own monitor stays outside; it never runs sandbox code.
 */
export async function releaseIntoCgroup(
  cgroup: SandboxCgroup,
  pid: number,
  gate: Writable | undefined,
  onError: (m: string) => void,
  abort: () => void,
): Promise<void> {
  try {
    await cgroup.join(pid)
    gate?.end('\n')
  } catch (error) {
    // ESRCH: the launcher already exited (bwrap refused its arguments); its own exit says why.
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return
    onError(`could not join the sandbox cgroup: ${(error as Error).message}`)
    abort()
  }
}
