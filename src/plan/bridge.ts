import { HTTP_PROXY_PORT, SOCKS_PROXY_PORT } from '../net/proxy.js'
import { BRIDGE_INSIDE, NET_DIR_INSIDE } from './bwrap.js'

/**
 * The bridge (one relay process besides the program) counts against the sandbox's process limit.
 */
export const BRIDGE_PROCESSES = 1

export function bridgeArgv(program: readonly string[]): string[] {
  return [
    BRIDGE_INSIDE,
    `--dir=${NET_DIR_INSIDE}`,
    `--http=${HTTP_PROXY_PORT}`,
    `--socks=${SOCKS_PROXY_PORT}`,
    '--',
    ...program,
  ]
}
