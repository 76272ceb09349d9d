// The reader of cordon's own stdout or stderr went away (`cordon run ... | head`). Node ignores SIGPIPE,
// so the failed write arrives as an EPIPE 'error' event, which unhandled would crash with a stack trace
// and leave the sandbox behind. Instead cordon stops what it runs, prints nothing more and exits 141
// (128+SIGPIPE), as a Unix tool killed by SIGPIPE would.

export const EXIT_BROKEN_PIPE = 141

let broken = false
const listeners = new Set<() => void>()

/** Install once, before anything is written: a write can fail at any time after. */
export function watchOwnPipes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error
      if (broken) return
      broken = true
      // Set here too: the error can come after main() has set the exit code.
      process.exitCode = EXIT_BROKEN_PIPE
      for (const listener of listeners) listener()
    })
  }
}

export function pipeBroken(): boolean {
  return broken
}

/** Call `listener` when a pipe breaks (at once if one already has); returns how to stop listening. */
export function onBrokenPipe(listener: () => void): () => void {
  if (broken) listener()
  listeners.add(listener)
  return () => listeners.delete(listener)
}

/** Write, unless a pipe broke: after that cordon prints nothing more, on either stream. */
export function print(stream: NodeJS.WriteStream, data: string | Uint8Array): void {
  if (!broken) stream.write(data)
}

/**
 * Run `body` with a signal that Ctrl-C, SIGTERM, a closed terminal (SIGHUP) and a broken output pipe
 * abort: the CLI, not the library, owns the process's signals, and nobody reading the output any more is a
 * reason to stop as well.
 */
export async function whileCancelable<T>(body: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController()
  const cancel = () => controller.abort()
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
  for (const sig of signals) process.once(sig, cancel)
  const offBrokenPipe = onBrokenPipe(cancel)
  try {
    return await body(controller.signal)
  } finally {
    offBrokenPipe()
    for (const sig of signals) process.off(sig, cancel)
  }
}
