import { HTTP_PROXY_PORT, SOCKS_PROXY_PORT } from '../net/proxy.js'
import { BRIDGE_INSIDE, NET_DIR_INSIDE } from './bwrap.js'

/**
 * The fd on which the bridge reads the run's token (and closes it before anything else): never an argv,
 * a file or the environment, which other sandboxes of the same uid could read.
 */
export const TOKEN_FD = 9

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
