// The default seccomp filter, built at run time as classic BPF for bubblewrap's --seccomp fd and for the
// process tier's launcher. Each rule is a short block that ends in a return, so every jump is local.
// The builder is pure: it takes the architecture, so every architecture's program is built and tested
// on any machine (test/plan/seccomp-verdicts.test.ts runs them through a BPF interpreter).
import { isSyscallName, type SeccompArch, syscallNumber } from '../host/syscalls.js'

interface ArchFilter {
  /** AUDIT_ARCH_* of the native ABI: any other (i386 on x86_64, AArch32 on arm64, big-endian) is killed. */
  audit: number
  /**
   * Numbers from this one up are killed: x32 calls are x86_64 numbers with bit 30 set, which would slip past
   * rules on numbers. null: the architecture has no such ABI (a number it lacks is ENOSYS).
   */
  killFrom: number | null
  /** Calls the filter's own rules name that this architecture does not have: nothing to filter there. */
  absent: readonly string[]
}

const ARCHES: Readonly<Record<SeccompArch, ArchFilter>> = {
  x86_64: { audit: 0xc000003e, killFrom: 0x40000000, absent: [] },
  // EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE: big-endian arm64, whose arguments the offsets below
  // would misread, and AArch32 tasks (AUDIT_ARCH_ARM) have other values. The generic table has only the
  // *at forms of the calls that make or chmod a file.
  aarch64: { audit: 0xc00000b7, killFrom: null, absent: ['creat', 'chmod', 'mknod', 'open'] },
}

const RET_KILL_PROCESS = 0x80000000
const RET_ALLOW = 0x7fff0000
const retErrno = (errno: number) => 0x00050000 | errno
const EPERM = 1
const ENOSYS = 38
const EAFNOSUPPORT = 97
const AF_UNIX = 1
const AF_INET = 2
const AF_INET6 = 10
const AF_NETLINK = 16

// struct seccomp_data: nr @0, arch @4, instruction pointer @8, args[i] @16 + 8i (little-endian: low half first).
const OFF_NR = 0
const OFF_ARCH = 4
const argLow = (i: number) => 16 + 8 * i

const LD_ABS = 0x20
const JA = 0x05
const JEQ = 0x15
const JGT = 0x25
const JGE = 0x35
const JSET = 0x45
const RET = 0x06

type Insn = [code: number, jt: number, jf: number, k: number]
const ld = (offset: number): Insn => [LD_ABS, 0, 0, offset]
const ret = (k: number): Insn => [RET, 0, 0, k]

/** Refused with EPERM outright: debugging other processes, kernel and mount surface, keys, exotic I/O. */
export const DEFAULT_DENIED = [
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'mount',
  'umount2',
  'pivot_root',
  'open_tree',
  // open_tree() with mount attributes to set (Linux 6.15): as open_tree.
  'open_tree_attr',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
  'bpf',
  'perf_event_open',
  'keyctl',
  'add_key',
  'request_key',
  'userfaultfd',
  // Unprivileged since 5.13; its groups count against the user's fs.fanotify.max_user_groups (the calling
  // user's, not as root), and no sandbox needs to watch file systems that way (inotify stays).
  'fanotify_init',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'setns',
] as const

/**
 * Refused with ENOSYS, so programs take the fallback they have for old kernels. clone3 passes its flags
 * in memory a filter cannot read (libc falls back to clone). Kernel AIO: each io_setup ring counts against
 * the host-wide fs.aio-max-nr, not against the sandbox (libaio users fall back to threads); the other
 * calls work only on a ring from io_setup.
 */
export const ENOSYS_CALLS: readonly string[] = [
  'clone3',
  // Its mode is in memory too (struct open_how): see SETID_MODES. Programs fall back to openat.
  'openat2',
  'io_setup',
  'io_destroy',
  'io_getevents',
  'io_submit',
  'io_cancel',
  'io_pgetevents',
]

/**
 * SysV IPC and POSIX message queues: objects of the IPC namespace, which outlive the processes that made
 * them and are shared by everything in that namespace. Refused (EPERM) where the sandbox has no IPC
 * namespace of its own (the process tier not as root): otherwise a sandbox could leave memory and data
 * behind on the host, or attach to the user's own segments by id.
 */
export const HOST_IPC_CALLS: readonly string[] = [
  'shmget',
  'shmat',
  'shmctl',
  'shmdt',
  'semget',
  'semop',
  'semctl',
  'semtimedop',
  'msgget',
  'msgsnd',
  'msgrcv',
  'msgctl',
  'mq_open',
  'mq_unlink',
  'mq_timedsend',
  'mq_timedreceive',
  'mq_notify',
  'mq_getsetattr',
]

/** S_ISUID | S_ISGID. */
const SETID_BITS = 0o6000
/**
 * The calls that give a file a mode, by the argument that holds it. A set-uid or set-gid file left in a
 * writable path would let anyone on the host run it as the sandbox's uid (as root, a pool uid another
 * run gets later; not as root, the calling user) and its gid: refused (EPERM) whatever the tier.
 */
const SETID_MODES: readonly (readonly [arg: number, calls: readonly string[]])[] = [
  [1, ['creat', 'chmod', 'fchmod', 'mknod']],
  [2, ['open', 'mknodat', 'fchmodat', 'fchmodat2']],
  [3, ['openat']],
]

/** Every namespace flag: a new user namespace would hand the sandbox capabilities to build the rest. */
const CLONE_NEW_ANY = 0x7e020000
/**
 * unshare() also takes CLONE_NEWTIME, which sits in the exit signal's byte of clone()'s flags (so clone()
 * cannot ask for it, and its exit signals must not be refused): only clone3, ENOSYS here, and unshare can.
 */
const CLONE_NEWTIME = 0x80
const TIOCSTI = 0x5412
const TIOCLINUX = 0x541c
/** personality() values that change nothing dangerous (query, PER_LINUX, PER_LINUX32, UNAME26). */
const SAFE_PERSONALITIES = [0, 0x8, 0x20000, 0x20008, 0xffffffff]

/** `if nr == n: <block>` — the block must end in a return. */
function when(nr: number, block: Insn[]): Insn[] {
  return [[JEQ, 0, block.length, nr], ...block]
}

/** A conditional jump reaches at most 255 instructions ahead. */
const MAX_JUMP = 255

/** Distinct syscall numbers as sorted runs of consecutive ones: [first, last]. */
function consecutiveRuns(numbers: readonly number[]): [number, number][] {
  const runs: [number, number][] = []
  for (const n of [...new Set(numbers)].sort((a, b) => a - b)) {
    const last = runs.at(-1)
    if (last && last[1] === n - 1) last[1] = n
    else runs.push([n, n])
  }
  return runs
}

/**
 * `if nr is one of numbers: return errno`, with the syscall number loaded. The kernel checks and compiles
 * every instruction at each launch (~1 µs each), so a run of three or more consecutive numbers is one range
 * check and the refusals share a return. Long lists become blocks, each with a return its jumps can reach.
 */
function refuse(numbers: readonly number[], errno = EPERM): Insn[] {
  const runs = consecutiveRuns(numbers)
  const width = ([lo, hi]: [number, number]) => (lo === hi ? 1 : 2)
  const out: Insn[] = []
  for (let start = 0; start < runs.length; ) {
    let size = 0
    let end = start
    while (end < runs.length && size + width(runs[end]!) <= MAX_JUMP) size += width(runs[end++]!)
    // The block's return sits after a jump over it, at index size + 1: from index i that is size - i ahead.
    const block: Insn[] = []
    for (const [lo, hi] of runs.slice(start, end)) {
      const i = block.length
      if (lo === hi) block.push([JEQ, size - i, 0, lo])
      else if (hi === lo + 1) block.push([JEQ, size - i, 0, lo], [JEQ, size - i - 1, 0, hi])
      else block.push([JGE, 0, 1, lo], [JGT, 0, size - i - 1, hi]) // below lo: skip; above hi: go on
    }
    out.push(...block, [JA, 0, 0, 1], ret(retErrno(errno)))
    start = end
  }
  return out
}

/**
 * `if nr is one of calls: EPERM when argument arg has a set-id bit, else allow`, with the syscall
 * number loaded. The calls of one argument share a block: a miss jumps over it to the next group.
 */
function refuseSetIdModes(nr: (name: string) => number | null): Insn[] {
  const out: Insn[] = []
  for (const [arg, names] of SETID_MODES) {
    const calls = present(names.map(nr))
    const block: Insn[] = [ld(argLow(arg)), [JSET, 0, 1, SETID_BITS], ret(retErrno(EPERM)), ret(RET_ALLOW)]
    calls.forEach((call, i) => {
      const last = i === calls.length - 1
      // Taken: to the block, past the calls after this one; the last one's miss skips the block.
      out.push([JEQ, last ? 0 : calls.length - 1 - i, last ? block.length : 0, call])
    })
    out.push(...block)
  }
  return out
}

/** Return `errno` when the low 32 bits of argument `arg` are one of `values`, else allow. */
function argIn(arg: number, values: readonly number[], onMatch: number, otherwise: number): Insn[] {
  const out: Insn[] = [ld(argLow(arg))]
  values.forEach((v, i) => {
    out.push([JEQ, values.length - i, 0, v])
  })
  out.push(ret(otherwise), ret(onMatch))
  return out
}

/**
 * What programs need: local sockets, IP, and netlink (getaddrinfo and `ip` ask the kernel about
 * interfaces through it). Every other family is kernel surface no sandbox needs: AF_VSOCK reaches the
 * hypervisor, AF_ALG the kernel's crypto code, AF_PACKET/AF_KEY/AF_TIPC... protocol code a sandbox's own
 * namespaces do not fence off.
 */
const NETWORK_FAMILIES = [AF_UNIX, AF_INET, AF_INET6, AF_NETLINK] as const

/**
 * The socket families a sandbox may open. The process tier without the host's network has no network
 * namespace of its own (or one it does not rely on), so the filter keeps it to AF_UNIX.
 */
export function socketFamilies(
  tier: 'namespace' | 'process',
  network: 'none' | 'host' | 'allowlist',
): readonly number[] {
  return tier === 'process' && network === 'none' ? [AF_UNIX] : NETWORK_FAMILIES
}

export interface SeccompOptions {
  /** More syscall names to refuse with EPERM. */
  extraDenied?: readonly string[]
  /**
   * The only families socket() and socketpair() may create (see `socketFamilies`); the rest get
   * EAFNOSUPPORT, as systemd's RestrictAddressFamilies. Default: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK.
   * The other ways to hold a socket make none of a new family: accept() gives the listener's, and a
   * descriptor received over a unix socket or taken with pidfd_getfd was made by someone already allowed
   * to. io_uring, which could open sockets behind the filter's back, is refused by default.
   */
  socketFamilies?: readonly number[]
  /**
   * The sandbox runs as the host's uid in the host's pid namespace (the process tier without a uid of its
   * own): the calls that set another process's limits, priority or scheduling by its pid are refused
   * (EPERM) unless they name the caller itself (pid 0). The kernel lets any process of a uid set them on
   * every other (prlimit64 on the host or the spawner: every later run inherits a hard limit no one can
   * raise again); Landlock's scopes fence signals and ptrace but not these.
   */
  selfOnly?: boolean
}

/** setpriority's and ioprio_set's `which` for one process (PRIO_PROCESS, IOPRIO_WHO_PROCESS). */
const PRIO_PROCESS = 0
const IOPRIO_WHO_PROCESS = 1
/** The calls whose first argument is a pid (0: the caller) and which set something of that process. */
const PID_SETTERS = [
  'prlimit64',
  'sched_setaffinity',
  'sched_setscheduler',
  'sched_setparam',
  'sched_setattr',
]

/** `which` one process and `who` the caller (0), else EPERM: PRIO_USER 0 would be every process of the uid. */
function selfOnlyWhichWho(which: number): Insn[] {
  return [
    ld(argLow(0)),
    [JEQ, 0, 2, which],
    ld(argLow(1)),
    [JEQ, 1, 0, 0],
    ret(retErrno(EPERM)),
    ret(RET_ALLOW),
  ]
}

/**
 * The number of each call a rule of the filter names on `arch`; null for one listed as absent there. A name
 * neither in the table nor listed throws: a misspelt rule must not vanish from the filter silently.
 */
function ruleNumbers(arch: SeccompArch): (name: string) => number | null {
  return (name) => {
    const nr = syscallNumber(name, arch)
    if (nr !== undefined) return nr
    if (ARCHES[arch].absent.includes(name)) return null
    throw new Error(`seccomp: ${name} is not a system call on ${arch}`)
  }
}

const present = (numbers: readonly (number | null)[]) => numbers.filter((n): n is number => n !== null)

/** The filter as instructions, for the system calls of `arch`. */
export function seccompInstructions(arch: SeccompArch, opts: SeccompOptions = {}): Insn[] {
  const { audit, killFrom } = ARCHES[arch]
  const extraDenied = opts.extraDenied ?? []
  const families = [...new Set(opts.socketFamilies ?? NETWORK_FAMILIES)].sort((a, b) => a - b)
  const rule = ruleNumbers(arch)
  // The calls whose arguments are checked below exist on every architecture.
  const nr = (name: string) => {
    const n = rule(name)
    if (n === null) throw new Error(`seccomp: no ${name} on ${arch}, whose arguments the filter checks`)
    return n
  }
  const denied = present([
    ...DEFAULT_DENIED.map(rule),
    // A call this architecture does not have cannot be made: there is nothing to refuse.
    ...extraDenied.map((name) => {
      if (!isSyscallName(name)) throw new Error(`unknown system call "${name}"`) // the schema refuses these first
      return syscallNumber(name, arch) ?? null
    }),
  ])
  return [
    ld(OFF_ARCH),
    [JEQ, 1, 0, audit],
    ret(RET_KILL_PROCESS),
    ld(OFF_NR),
    ...(killFrom === null ? [] : [[JGE, 0, 1, killFrom] as Insn, ret(RET_KILL_PROCESS)]),
    // Policy denials first: a name both lists hold is EPERM, as denySyscalls says.
    ...refuse(denied),
    ...refuse(present(ENOSYS_CALLS.map(rule)), ENOSYS),
    ...refuseSetIdModes(rule),
    ...when(nr('unshare'), [
      ld(argLow(0)),
      [JSET, 0, 1, CLONE_NEW_ANY | CLONE_NEWTIME],
      ret(retErrno(EPERM)),
      ret(RET_ALLOW),
    ]),
    ...when(nr('clone'), [ld(argLow(0)), [JSET, 0, 1, CLONE_NEW_ANY], ret(retErrno(EPERM)), ret(RET_ALLOW)]),
    // The kernel reads ioctl's request as 32 bits, so only the low half is compared: a request with high
    // bits set is the same TIOCSTI to the kernel and is refused too.
    ...when(nr('ioctl'), argIn(1, [TIOCSTI, TIOCLINUX], retErrno(EPERM), RET_ALLOW)),
    ...when(nr('personality'), argIn(0, SAFE_PERSONALITIES, RET_ALLOW, retErrno(EPERM))),
    ...(opts.selfOnly
      ? [
          ...PID_SETTERS.flatMap((name) => when(nr(name), argIn(0, [0], RET_ALLOW, retErrno(EPERM)))),
          ...when(nr('setpriority'), selfOnlyWhichWho(PRIO_PROCESS)),
          ...when(nr('ioprio_set'), selfOnlyWhichWho(IOPRIO_WHO_PROCESS)),
        ]
      : []),
    // socketpair() creates both sockets through the family's own code before it can fail: filtered too.
    [JEQ, 1, 0, nr('socket')],
    ...when(nr('socketpair'), argIn(0, families, RET_ALLOW, retErrno(EAFNOSUPPORT))),
    ret(RET_ALLOW),
  ]
}

/** The last program built: every run of a process usually asks for the same one. */
let last: { key: string; program: Buffer } | null = null

/** The filter in the kernel's struct sock_filter layout, ready to hand to bwrap or cordon's launcher. */
export function seccompProgram(arch: SeccompArch, opts: SeccompOptions = {}): Buffer {
  // Every input is in the key: a program built for one tier, network or architecture must never serve another.
  const key = `${arch}:${(opts.socketFamilies ?? NETWORK_FAMILIES).join(',')}:${(opts.extraDenied ?? []).join(',')}:${opts.selfOnly === true}`
  if (last?.key !== key) last = { key, program: buildProgram(seccompInstructions(arch, opts)) }
  return last.program
}

function buildProgram(insns: readonly Insn[]): Buffer {
  const buf = Buffer.alloc(insns.length * 8)
  // Through a DataView, V8's own: Buffer's writeUInt* are Node functions a CLI start would compile first.
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  insns.forEach(([code, jt, jf, k], i) => {
    // A jump too long for its byte would wrap silently here, into another filter: refused, as writeUInt8 did.
    if (jt > 0xff || jf > 0xff || code > 0xffff)
      throw new RangeError(`seccomp: instruction ${i} out of range`)
    view.setUint16(i * 8, code, true)
    view.setUint8(i * 8 + 2, jt)
    view.setUint8(i * 8 + 3, jf)
    view.setUint32(i * 8 + 4, k >>> 0, true)
  })
  return buf
}
