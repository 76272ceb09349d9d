// The default spawner: the one helper the library keeps per process (per thread that runs sandboxes: each
// worker thread has its own module state, and its helper dies with that thread). It is opened in the
// background at the first run that could use it and never waited for: the runs before it is ready fork the
// host, as `spawner: false` always does. A helper found dead, closed by its user, or opened under another
// uid is replaced, again in the background. It holds nothing of any run after that run's end (see
// native/spawner.c), no fd and no environment of the host, and never keeps the host's event loop alive.
import { Spawner } from './spawner.js'

/** After a failed open, the next try waits this long: a helper that cannot start is not retried per run. */
const RETRY_MS = 10_000

let current: Spawner | null = null
let opening = false
let retryAt = 0
/**
 * A process that changed its uid is no longer dumpable (its /proc/<pid>/fd is root's), so no helper of its
 * new uid could reopen the judged paths' fds it passes: it forks the host from then on.
 */
const loadedAs = process.getuid?.()

/**
 * The default spawner when it can start a process now, else null; either way one is opening in the
 * background when none is usable (after the caller's own synchronous work: the run that asked forks the
 * host first, so the helper's start never delays it).
 */
export function spawnerForRun(): Spawner | null {
  if (current?.usable) return current
  if (process.getuid?.() !== loadedAs) return null
  if (current) {
    // Dead, closed or opened under another uid: its runs go on (close waits for them); new ones do not.
    const old = current
    current = null
    void old.close().catch(() => {})
  }
  if (!opening && Date.now() >= retryAt) {
    opening = true
    setImmediate(openInBackground)
  }
  return null
}

function openInBackground(): void {
  Spawner.open(undefined, true).then(
    (spawner) => {
      opening = false
      current = spawner
    },
    () => {
      opening = false
      retryAt = Date.now() + RETRY_MS
    },
  )
}

/**
 * The default spawner the library shares between runs that name none, while one is open: `pid` to see it,
 * `close()` to end it (the next run that could use one opens a new one; `spawner: false` in a run's options
 * forks the host instead, and never opens one).
 */
export function defaultSpawner(): Spawner | undefined {
  return current?.usable ? current : undefined
}
