// Signal names as cordon reports them: Node's for the classic signals, `kill -l`'s for the real-time ones.
import { constants } from 'node:os'

/** glibc's SIGRTMIN (the kernel's 32 and 33 are its own): real-time signals are named from it, as `kill -l` does. */
const RTMIN = 34
const SIGNAL_MAX = 64

/** Node's name for a signal, the first it lists for a number (SIGABRT, not SIGIOT); null for real-time ones. */
export function nodeSignalName(n: number): NodeJS.Signals | null {
  return (Object.entries(constants.signals).find(([, v]) => v === n)?.[0] as NodeJS.Signals) ?? null
}

/** A signal's name; Node has none for the real-time ones, which become SIGRTMIN+k (and SIG32, SIG33). */
export function signalName(n: number): string | null {
  const named = nodeSignalName(n)
  if (named) return named
  if (n < 32 || n > SIGNAL_MAX) return null
  return n < RTMIN ? `SIG${n}` : n === RTMIN ? 'SIGRTMIN' : `SIGRTMIN+${n - RTMIN}`
}

/** The number of a signal named by `signalName`; null for none. */
export function signalNumber(name: string): number | null {
  const own = constants.signals[name as NodeJS.Signals]
  if (own !== undefined) return own
  const rt = /^SIGRTMIN(?:\+(\d+))?$|^SIG(3[23])$/.exec(name)
  if (!rt) return null
  const n = rt[2] !== undefined ? Number(rt[2]) : RTMIN + Number(rt[1] ?? 0)
  return n <= SIGNAL_MAX ? n : null
}
