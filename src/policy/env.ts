// Environment policy: start clean, add passEnv from the host, then explicit env on top.

import { SAFE_PATH } from '../host/programs.js'

/** The small set every sandbox gets; nothing else of the host leaks in unless asked for. */
export function baseEnv(): Record<string, string> {
  return { PATH: SAFE_PATH, HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', TERM: 'dumb' }
}

export function buildEnv(
  hostEnv: NodeJS.ProcessEnv,
  passEnv: readonly string[],
  env: Readonly<Record<string, string>>,
): Record<string, string> {
  const out = baseEnv()
  for (const name of passEnv) {
    const value = hostEnv[name]
    if (value !== undefined) out[name] = value
  }
  return Object.assign(out, env)
}
