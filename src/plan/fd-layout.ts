// The sandbox's file descriptors beyond stdio, by number, in one place: the launcher (native/launch.c),
// bwrap, the bridge and the host's pipes (run/fds.ts) must all agree on them.
//
//   3 STATUS_FD     bwrap's --json-status-fd (namespace tier)          piped, host reads
//   4 REFUSAL_FD    the launcher's refusal (both tiers)                piped, host reads
//   5 SECCOMP_FD    the seccomp program for bwrap (namespace tier)     piped, host writes
//   6 LOG_FD        the sandbox's log channel (CORDON_LOG_FD)          piped, host reads
//   7 CALL_FDS      a called function's request (host writes) and
//   8               reply (host reads)                                 piped
//   7 WARM_FDS      or, in a warm member (never a call), its activation
//   8               record (host writes) and its readiness (host reads)
//   9 TOKEN_FD      the network bridge's token (allowlist)             piped, host writes
//  10 IDENTITY_FDS  /etc/passwd and /etc/group for bwrap: memfds the
//  11               launcher makes itself                              not piped
//  12 FIRST_PATH_FD and up: the judged paths, one fd per use (see PathFds in paths.ts)
//
// Programs that run apart from this code repeat the numbers they use: native/launch.c (4), bridge.c (9),
// guard.c and the function runner src/functions/child.ts (7, 8), which runs in the sandbox where only its
// own directory is shown. Change them together.
import type { Isolation } from '../policy/result.js'
import type { IdentityPath } from './identity.js'

/** bwrap's --json-status-fd: its init's host pid, then the program's exit once it ran it. */
export const STATUS_FD = 3
/**
 * cordon's launcher writes why it refused to start here (both tiers), never on stderr: it makes the fd
 * close-on-exec first thing, so neither bwrap nor the program ever holds it, and nothing they print counts.
 */
export const REFUSAL_FD = 4
/** bwrap reads the seccomp program from this fd. */
export const SECCOMP_FD = 5
/** The sandbox writes JSON log lines here; its number is in the sandbox's CORDON_LOG_FD. */
export const LOG_FD = 6
/** A called function's request (in) and reply (out), kept off stdout so nothing printed can forge them. */
export const CALL_FDS = { request: 7, reply: 8 } as const
/**
 * A warm member's own (native/await.c): the activation record the host writes, and the byte that says the
 * member is ready. The numbers of a call's: a called function's run is never warm. cordon-await closes both
 * before the program runs.
 */
export const WARM_FDS = { activation: 7, ready: 8 } as const
/**
 * The fd on which the bridge reads the run's token (and closes it before anything else): never an argv,
 * a file or the environment, which other sandboxes of the same uid could read.
 */
export const TOKEN_FD = 9
/**
 * bwrap copies cordon's /etc/passwd and /etc/group from these (--ro-bind-data): memfds the launcher makes
 * from its argv, so no pipe and nothing on the host's disk. Not piped: no entry in `pipedFds`.
 */
export const IDENTITY_FDS: Readonly<Record<IdentityPath, number>> = { '/etc/passwd': 10, '/etc/group': 11 }
/** The sandbox's fds for judged paths start here, above every fd named before. */
export const FIRST_PATH_FD = 12

/**
 * The fds beyond stdio a run pipes: bwrap's status and seccomp fds, the launcher's refusal pipe, the log
 * channel, a called function's two, and the network bridge's token.
 */
export function pipedFds(
  tier: Isolation,
  seccomp: boolean,
  calling: boolean,
  proxied = false,
  warm = false,
): number[] {
  return [
    ...(tier === 'namespace' ? [STATUS_FD] : []),
    REFUSAL_FD,
    ...(tier === 'namespace' && seccomp ? [SECCOMP_FD] : []),
    LOG_FD,
    ...(calling ? [CALL_FDS.request, CALL_FDS.reply] : []),
    ...(warm ? [WARM_FDS.activation, WARM_FDS.ready] : []),
    ...(proxied ? [TOKEN_FD] : []),
  ]
}
