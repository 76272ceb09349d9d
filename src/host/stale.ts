// What a cordon process that died mid-run leaves behind (a SIGKILLed host cleans nothing up): its sandbox
// cgroups and private TMPDIRs, named `<prefix><owner pid>-…`, are found and removed by whoever comes next.
import { readdirSync } from 'node:fs'
import { monotonicMs } from '../lazy.js'
import { isAlive } from './procs.js'

/** A directory is looked through at most this often per prefix: a sweep is a readdir, a run is not. */
const SWEEP_EVERY_MS = 10_000
const lastSweep = new Map<string, number>()

/**
 * Entries of `parent` named `<prefix><pid>` or `<prefix><pid>-…` whose owner pid no longer exists; none
 * when this parent and prefix were looked at less than 10 s ago (as `throttle` remembers: this module's
 * own record unless a caller, a test, brings its own), or `parent` cannot be read.
 */
export function staleEntries(parent: string, prefix: string, throttle = lastSweep): string[] {
  const key = `${parent}\0${prefix}`
  const now = monotonicMs()
  if (now - (throttle.get(key) ?? -Infinity) < SWEEP_EVERY_MS) return []
  throttle.set(key, now)
  let names: string[]
  try {
    names = readdirSync(parent).filter((n) => n.startsWith(prefix))
  } catch {
    return []
  }
  return names.filter((name) => {
    const owner = name.slice(prefix.length).split('-')[0]!
    return /^[1-9]\d*$/.test(owner) && !isAlive(Number(owner))
  })
}
