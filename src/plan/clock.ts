// The sandbox's own wall clock, through libfaketime. One clock for the whole sandbox: FAKETIME is the offset
// from the real time (fixed at launch), so every process sees the same time, which starts at the instant
// and runs on. An absolute start (`@...`) would restart the clock in every process (`date; sleep 1; date`
// printed the start twice), and with the monotonic clocks left real, libfaketime 0.9.10 turns an absolute
// monotonic deadline (Python's time.sleep: clock_nanosleep TIMER_ABSTIME) into EINVAL. Shifted by the same
// offset, monotonic clocks still measure intervals exactly, so timeouts and sleeps behave.
import { PolicyError } from '../errors.js'

export interface ClockEnv {
  TZ: string
  FAKETIME: string
  LD_PRELOAD: string
}

/**
 * The variables that give the program the clock (set by `env` right before it, so no launcher loads
 * libfaketime). `now` is the real time of the launch in ms. The zone is the sandbox's own (UTC unless
 * env.TZ), so a start instant shows in it.
 */
export function clockEnv(
  start: string,
  lib: string,
  env: Record<string, string>,
  now = Date.now(),
): ClockEnv {
  const tz = env.TZ ?? 'UTC'
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz })
  } catch {
    throw new PolicyError('env.TZ', `"${tz}" is not a time zone the clock can use`)
  }
  const offset = (Date.parse(start) - now) / 1000
  return {
    TZ: tz,
    // Seconds with a sign, to the millisecond: libfaketime reads a leading +/- as an offset.
    FAKETIME: `${offset < 0 ? '-' : '+'}${Math.abs(offset).toFixed(3)}`,
    LD_PRELOAD: env.LD_PRELOAD ? `${lib}:${env.LD_PRELOAD}` : lib,
  }
}
