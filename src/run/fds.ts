// The host's side of the sandbox's file descriptors beyond stdio, numbered in plan/fd-layout.ts: bwrap's
// status fd and seccomp program, the launcher's refusal pipe, the log channel, a called function's request
// and reply, the network bridge's token, and from FIRST_PATH_FD the judged paths the sandbox gets by fd.
// One layout, so spawn's stdio array and the pipes agree. (IDENTITY_FDS are the launcher's own memfds.)
import type { ChildProcess } from 'node:child_process'
import type { Readable, Writable } from 'node:stream'
import { CALL_FDS, LOG_FD, REFUSAL_FD, SECCOMP_FD, STATUS_FD, TOKEN_FD } from '../plan/fd-layout.js'
import type { LaunchPlan } from '../plan/plan.js'
import type { Policy } from '../policy/schema.js'
import type { SpawnedProcess, SpawnStdio } from '../spawner/spawner.js'

/** A started sandbox: by Node's spawn, or by a spawner. */
export type Child = ChildProcess | SpawnedProcess

/** A pipe, nothing, or (a number) that fd of the host's, passed as it is. */
type Stdio = 'pipe' | 'ignore' | number

/**
 * spawn's stdio: stdout always piped, stderr too unless it is merged into stdout (the launcher then makes
 * fd 2 a copy of fd 1 before anything runs); stdin only when something will be written to it (else
 * /dev/null: the same EOF, without a pipe to make, end and close); beyond that the plan's own fds: its pipes,
 * then the host's fds of the judged paths, each at its own number.
 */
export function stdioFor(plan: LaunchPlan, stdin: boolean): Stdio[] {
  const slots = new Map<number, Stdio>([
    [0, stdin ? 'pipe' : 'ignore'],
    [1, 'pipe'],
    [2, plan.mergeOutput ? 'ignore' : 'pipe'],
  ])
  for (const fd of plan.fds) slots.set(fd, 'pipe')
  for (const { child, host } of plan.pathFds.passed) slots.set(child, host)
  // Every slot filled: spawn would skip a hole in the array and shift the fds after it.
  return Array.from({ length: Math.max(2, ...slots.keys()) + 1 }, (_, fd) => slots.get(fd) ?? 'ignore')
}

/** Which way each piped fd goes: 'write' the host writes it (the sandbox reads), 'read' the host reads it. */
const DIRECTION: Readonly<Record<number, 'read' | 'write'>> = {
  0: 'write',
  1: 'read',
  2: 'read',
  [STATUS_FD]: 'read',
  [REFUSAL_FD]: 'read',
  [SECCOMP_FD]: 'write',
  [LOG_FD]: 'read',
  [CALL_FDS.request]: 'write',
  [CALL_FDS.reply]: 'read',
  [TOKEN_FD]: 'write',
}

/** The same layout for a spawner, whose pipes go one way each (Node's are socketpairs, both ways). */
export function spawnerStdio(stdio: readonly Stdio[]): SpawnStdio[] {
  return stdio.map((s, fd) => {
    if (typeof s === 'number') return s // a judged path's fd: the spawner reopens it through /proc
    if (s === 'ignore') return fd < 3 ? 'null' : 'none'
    const direction = DIRECTION[fd]
    if (direction === undefined) throw new Error(`fd ${fd} is piped but has no direction in the fd layout`)
    return direction
  })
}

export interface ExtraFds {
  /** bwrap's --json-status-fd. */
  status: Readable | undefined
  /** cordon's launcher's refusal, if it refuses. */
  refusal: Readable | undefined
  seccomp: Writable | undefined
  log: Readable | undefined
  request: Writable | undefined
  reply: Readable | undefined
  /** The network bridge's token (network allowlist). */
  token: Writable | undefined
}

export function extraFds(child: Child): ExtraFds {
  const pipes = child.stdio as unknown as ((Readable & Writable) | null | undefined)[]
  // bwrap closes these when it is done with them; a reset then is expected, not an error.
  for (const pipe of pipes.slice(3)) pipe?.on('error', () => {})
  const at = (fd: number) => pipes[fd] ?? undefined
  return {
    status: at(STATUS_FD),
    refusal: at(REFUSAL_FD),
    seccomp: at(SECCOMP_FD),
    log: at(LOG_FD),
    request: at(CALL_FDS.request),
    reply: at(CALL_FDS.reply),
    token: at(TOKEN_FD),
  }
}

/**
 * Feed the sandbox's stdin; returns what to do when the run ends: a Readable the program did not read to
 * its end is destroyed then, so a file or socket behind it is not left open with nobody reading it.
 */
export function feedStdin(child: Child, stdin: Policy['stdin'], keepOpen: boolean): () => void {
  const pipe = child.stdin
  const nothing = () => {}
  if (!pipe) return nothing
  pipe.on('error', () => {}) // the sandbox may exit without reading its input (EPIPE)
  if (stdin === undefined) {
    if (!keepOpen) pipe.end()
  } else if (typeof stdin === 'string' || Buffer.isBuffer(stdin)) {
    pipe.end(stdin)
  } else {
    const source = stdin as Readable
    source.on('error', () => pipe.end()).pipe(pipe)
    return () => source.readableEnded || source.destroy()
  }
  return nothing
}
