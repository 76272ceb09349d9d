// Each architecture's seccomp program, run through the BPF interpreter (./cbpf.ts) over a table of
// (system call, arguments) → the verdict the filter means: every rule, on x86_64 and on aarch64. The
// expectations are written out here, not read from the builder's lists, so a rule that goes missing or
// changes meaning fails. The table must reach every instruction of each program. No kernel is needed:
// an aarch64 filter cannot be loaded on this machine (nor under qemu-user), so this is how it is tested;
// test/e2e/seccomp.test.ts checks the interpreter against the kernel where one can run the program.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type SeccompArch, SYSCALL_TABLES, syscallNumber } from '../../src/host/syscalls.js'
import { type SeccompOptions, seccompInstructions, seccompProgram } from '../../src/plan/seccomp.js'
import { ALLOW, AUDIT_ARCH, decode, errno, type Insn, KILL_PROCESS, runFilter, verdictName } from './cbpf.js'

const ARCHES: readonly SeccompArch[] = ['x86_64', 'aarch64']
const EPERM = errno(1)
const ENOSYS = errno(38)
const EAFNOSUPPORT = errno(97)

/** Calls the generic table (arm64) does not have: the rules on them exist on x86_64 only. */
const ABSENT_ON_AARCH64 = ['open', 'creat', 'chmod', 'mknod']

/** Refused with EPERM whatever their arguments. */
const DENIED = [
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'mount',
  'umount2',
  'pivot_root',
  'open_tree',
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
  'fanotify_init',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'setns',
]
/** Refused with ENOSYS, so programs take their fallback. */
const NOT_IMPLEMENTED = [
  'clone3',
  'openat2',
  'io_setup',
  'io_destroy',
  'io_getevents',
  'io_submit',
  'io_cancel',
  'io_pgetevents',
]
const HOST_IPC = [
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

const AT_FDCWD = -100
const HIGH = 2 ** 32 // a bit the kernel drops from an int argument
const S_IFREG = 0o100000
const CLONE_NEW = {
  NEWNS: 0x00020000,
  NEWCGROUP: 0x02000000,
  NEWUTS: 0x04000000,
  NEWIPC: 0x08000000,
  NEWUSER: 0x10000000,
  NEWPID: 0x20000000,
  NEWNET: 0x40000000,
}
const CLONE_NEWTIME = 0x00000080
const SIGCHLD = 17
const FORK_FLAGS = 0x01200000 | SIGCHLD // CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID
const THREAD_FLAGS = 0x003d0f00 // what pthread_create passes

type Case = [call: string, args: readonly (number | bigint)[], verdict: number, why?: string]

/** A call that takes a mode in argument `arg`: set-uid and set-gid modes are EPERM, the rest allowed. */
function modeCases(call: string, arg: number): Case[] {
  const withMode = (mode: number | bigint, other = 7): (number | bigint)[] => {
    const args: (number | bigint)[] = [AT_FDCWD, other, other, other]
    args[arg] = mode
    return args
  }
  return [
    [call, withMode(0o4755), EPERM, 'set-uid'],
    [call, withMode(0o2755), EPERM, 'set-gid'],
    [call, withMode(S_IFREG | 0o6000), EPERM, 'S_IFREG with both'],
    [call, withMode(HIGH + 0o4755), EPERM, 'set-uid under high bits'],
    [call, withMode(0o1777), ALLOW, 'sticky'],
    [call, withMode(0o755), ALLOW, 'plain'],
    [call, withMode(0o644, 0o6000), ALLOW, 'set-id bits in another argument'],
    [call, withMode(HIGH | 0o644), ALLOW, 'high bits only'],
  ]
}

const FAMILIES = {
  AF_UNSPEC: 0,
  AF_UNIX: 1,
  AF_INET: 2,
  AF_INET6: 10,
  AF_KEY: 15,
  AF_NETLINK: 16,
  AF_PACKET: 17,
}
const MORE_FAMILIES = { AF_ALG: 38, AF_VSOCK: 40 }

function socketCases(allowed: readonly number[]): Case[] {
  const out: Case[] = []
  for (const call of ['socket', 'socketpair']) {
    for (const [name, family] of Object.entries({ ...FAMILIES, ...MORE_FAMILIES })) {
      const verdict = allowed.includes(family) ? ALLOW : EAFNOSUPPORT
      out.push([call, [family, 1, 0], verdict, name])
      out.push([call, [HIGH + family, 1, 0], verdict, `${name} under high bits`])
    }
    out.push([call, [0xffffffff, 1, 0], EAFNOSUPPORT, 'family -1'])
  }
  return out
}

/** The default filter's meaning, call by call. */
const DEFAULT_CASES: Case[] = [
  ...DENIED.map((call): Case => [call, [], EPERM]),
  ...NOT_IMPLEMENTED.map((call): Case => [call, [], ENOSYS]),
  ...HOST_IPC.map((call): Case => [call, [], ALLOW, 'only refused without an IPC namespace']),
  ['setsid', [], ALLOW, 'only refused when the session marks the sandbox'],
  ...['read', 'write', 'close', 'execve', 'exit_group', 'getpid', 'futex', 'mkdirat', 'fchmodat'].map(
    (call): Case => [call, [], ALLOW],
  ),
  ...modeCases('openat', 3),
  ...modeCases('fchmodat', 2),
  ...modeCases('fchmodat2', 2),
  ...modeCases('mknodat', 2),
  ...modeCases('fchmod', 1),
  ...modeCases('open', 2),
  ...modeCases('creat', 1),
  ...modeCases('chmod', 1),
  ...modeCases('mknod', 1),
  ...Object.entries(CLONE_NEW).flatMap(([flag, bit]): Case[] => [
    ['unshare', [bit], EPERM, `CLONE_${flag}`],
    ['unshare', [HIGH + bit], EPERM, `CLONE_${flag} under high bits`],
    ['clone', [bit | SIGCHLD, 0, 0, 0, 0], EPERM, `CLONE_${flag}`],
  ]),
  ['unshare', [CLONE_NEWTIME], EPERM, 'CLONE_NEWTIME'],
  ['unshare', [0x00000400], ALLOW, 'CLONE_FILES'],
  ['unshare', [HIGH], ALLOW, 'high bits only'],
  ['clone', [FORK_FLAGS, 0, 0, 0, 0], ALLOW, "fork's flags"],
  ['clone', [THREAD_FLAGS, 1, 2, 3, 4], ALLOW, "a thread's flags"],
  ['clone', [HIGH + FORK_FLAGS], ALLOW, 'the kernel reads 32 bits of the flags'],
  ['ioctl', [0, 0x5412], EPERM, 'TIOCSTI'],
  ['ioctl', [0, HIGH + 0x5412], EPERM, 'TIOCSTI under high bits: the kernel reads 32'],
  ['ioctl', [0, 0x541c], EPERM, 'TIOCLINUX'],
  ['ioctl', [0, 0x5401], ALLOW, 'TCGETS'],
  ['ioctl', [0x5412, 0x541b], ALLOW, 'FIONREAD (TIOCSTI as the fd)'],
  ...[0xffffffff, 0, 0x8, 0x20000, 0x20008, HIGH].map(
    (p): Case => ['personality', [p], ALLOW, `0x${p.toString(16)}`],
  ),
  ...[0x0040000, 0x0400000, 0x0040008, 0x1, 0x8 | 0x0200000].map(
    (p): Case => ['personality', [p], EPERM, `0x${p.toString(16)}`],
  ),
  ...socketCases([1, 2, 10, 16]),
  ['accept4', [40], ALLOW, 'accept makes a socket of the listener family'],
  ['connect', [40], ALLOW],
]

interface Variant {
  name: string
  opts: SeccompOptions
  cases: Case[]
}

const VARIANTS: Variant[] = [
  { name: 'the default filter', opts: {}, cases: DEFAULT_CASES },
  {
    name: 'the process tier without a uid or cgroup, no IPC namespace, network none',
    opts: { extraDenied: ['setsid', ...HOST_IPC], socketFamilies: [1] },
    cases: [
      ...HOST_IPC.map((call): Case => [call, [], EPERM]),
      ['setsid', [], EPERM],
      ['getpid', [], ALLOW],
      ...socketCases([1]),
    ],
  },
  {
    name: "the process tier as the host's uid (selfOnly)",
    opts: { selfOnly: true },
    cases: [
      ...['prlimit64', 'sched_setaffinity', 'sched_setscheduler', 'sched_setparam', 'sched_setattr'].flatMap(
        (call): Case[] => [
          [call, [0, 7], ALLOW, 'its own (pid 0)'],
          [call, [4242], EPERM, 'another pid'],
          [call, [HIGH + 4242], EPERM, 'another pid under high bits'],
          [call, [HIGH], ALLOW, 'the kernel reads 32 bits of the pid'],
        ],
      ),
      ['setpriority', [0, 0, 19], ALLOW, 'PRIO_PROCESS, itself'],
      ['setpriority', [0, 4242, 19], EPERM, 'PRIO_PROCESS, another'],
      ['setpriority', [1, 0, 19], EPERM, 'PRIO_PGRP, its own group'],
      ['setpriority', [2, 0, 19], EPERM, 'PRIO_USER, its own uid: every process of it'],
      ['ioprio_set', [1, 0, 0x6000], ALLOW, 'IOPRIO_WHO_PROCESS, itself'],
      ['ioprio_set', [1, 4242, 0x6000], EPERM, 'another process'],
      ['ioprio_set', [3, 0, 0x6000], EPERM, 'IOPRIO_WHO_USER'],
      ['getpriority', [2, 0], ALLOW, 'reading'],
      ['prlimit64', [0, 7, 0, 0], ALLOW],
    ],
  },
  {
    name: 'denySyscalls',
    opts: { extraDenied: ['mkdirat', 'socket', 'io_setup', 'mkdir', 'fork'] },
    cases: [
      ['mkdirat', [], EPERM],
      ['mkdir', [], EPERM, 'x86_64 only'],
      ['fork', [], EPERM, 'x86_64 only'],
      ['socket', [1, 1, 0], EPERM, 'a denial wins over the family check'],
      ['socket', [40, 1, 0], EPERM],
      ['socketpair', [1, 1, 0], ALLOW],
      ['io_setup', [], EPERM, 'a denial wins over ENOSYS'],
      ['ptrace', [], EPERM],
      ['read', [], ALLOW],
    ],
  },
]

const programs = new Map<string, Insn[]>()
/** The verdict of `arch`'s program built with `opts` (built once) for call `nr` with `args`. */
function verdict(arch: SeccompArch, opts: SeccompOptions, nr: number, args: Case[1], visited?: Set<number>) {
  const key = `${arch} ${JSON.stringify(opts)}`
  if (!programs.has(key)) programs.set(key, seccompInstructions(arch, opts))
  return runFilter(programs.get(key)!, { nr, arch: AUDIT_ARCH[arch], args }, visited)
}

/** The cases of `cases` that `arch` has the call of, with its number. */
function casesOn(arch: SeccompArch, cases: Case[]): [Case, number][] {
  return cases.flatMap((c): [Case, number][] => {
    const nr = syscallNumber(c[0], arch)
    if (nr !== undefined) return [[c, nr]]
    // The only calls a case may lack: those that do not exist on arm64, and the x86_64-only denials.
    assert.ok(arch === 'aarch64', `${c[0]} is not in the ${arch} table`)
    return []
  })
}

for (const arch of ARCHES) {
  describe(`seccomp verdicts on ${arch}`, () => {
    for (const { name, opts, cases } of VARIANTS) {
      it(`${name}: every case gives its verdict`, () => {
        for (const [[call, args, want, why], nr] of casesOn(arch, cases)) {
          const got = verdict(arch, opts, nr, args)
          assert.equal(
            verdictName(got),
            verdictName(want),
            `${call}(${args.join(', ')})${why ? ` ${why}` : ''}`,
          )
        }
      })
    }

    it('the cases reach every instruction of the default program', () => {
      const program = seccompInstructions(arch)
      const visited = new Set<number>()
      for (const [[, args], nr] of casesOn(arch, DEFAULT_CASES)) verdict(arch, {}, nr, args, visited)
      verdict(arch, {}, 0, [], visited)
      runFilter(program, { nr: 0, arch: AUDIT_ARCH.i386 }, visited) // the architecture check's kill
      if (arch === 'x86_64') runFilter(program, { nr: 0x40000001, arch: AUDIT_ARCH.x86_64 }, visited)
      const missed = program.map((_, i) => i).filter((i) => !visited.has(i))
      assert.deepEqual(missed, [], 'instructions no case runs')
    })

    it('every number, known or not, with no arguments: EPERM, ENOSYS or allowed as the lists say', () => {
      const table = SYSCALL_TABLES[arch]
      const names = new Map(Object.entries(table).map(([name, nr]) => [nr, name]))
      const max = Math.max(...Object.values(table))
      for (let nr = 0; nr <= max + 2; nr++) {
        const name = names.get(nr) ?? ''
        const want = DENIED.includes(name)
          ? EPERM
          : NOT_IMPLEMENTED.includes(name)
            ? ENOSYS
            : name === 'socket' || name === 'socketpair'
              ? EAFNOSUPPORT // family 0, AF_UNSPEC
              : ALLOW
        assert.equal(
          verdictName(verdict(arch, {}, nr, [])),
          verdictName(want),
          `${nr} (${name || 'no call'})`,
        )
      }
    })

    it('another architecture or ABI is killed', () => {
      const others = Object.entries({ ...AUDIT_ARCH, aarch64_be: 0x800000b7, x86_64_be: 0x8000003e }).filter(
        ([name]) => name !== arch,
      )
      for (const [name, audit] of others) {
        for (const nr of [0, syscallNumber('read', arch)!, syscallNumber('getpid', arch)!]) {
          const got = runFilter(seccompInstructions(arch), { nr, arch: audit })
          assert.equal(verdictName(got), 'KILL_PROCESS', `${name} call ${nr}`)
        }
      }
      // x32 calls are x86_64 numbers with bit 30 set; arm64 has no such ABI (the kernel says ENOSYS).
      const x32write = 0x40000000 | 1
      assert.equal(verdict(arch, {}, x32write, []), arch === 'x86_64' ? KILL_PROCESS : ALLOW)
    })

    it('a call it lacks in denySyscalls changes nothing; an unknown name throws', () => {
      const lacking = arch === 'aarch64' ? ['open', 'fork', 'arch_prctl'] : []
      assert.deepEqual(
        seccompInstructions(arch, { extraDenied: [...lacking, 'mkdirat'] }),
        seccompInstructions(arch, { extraDenied: ['mkdirat'] }),
      )
      assert.throws(() => seccompInstructions(arch, { extraDenied: ['no_such_call'] }), /unknown system call/)
    })

    it('the program handed to the kernel decodes to the same instructions', () => {
      const opts = { extraDenied: ['mkdirat'], socketFamilies: [1] }
      assert.deepEqual(decode(seccompProgram(arch, opts)), seccompInstructions(arch, opts))
    })
  })
}

describe('seccomp verdicts across architectures', () => {
  it('arm64 lacks exactly the calls whose rules are x86_64 only', () => {
    const names = new Set(VARIANTS.flatMap((v) => v.cases.map(([call]) => call)))
    const lacking = [...names].filter((n) => syscallNumber(n, 'aarch64') === undefined).sort()
    assert.deepEqual(lacking, [...ABSENT_ON_AARCH64, 'fork', 'mkdir'].sort())
  })

  it('the verdict is the same on both for every call both have, with every table argument', () => {
    const distinct = new Map(VARIANTS.flatMap((v) => v.cases.map(([, args]) => [args.join(','), args])))
    const argsOf = [[], ...distinct.values()]
    for (const { opts } of VARIANTS) {
      for (const [name, x86] of Object.entries(SYSCALL_TABLES.x86_64)) {
        const arm = syscallNumber(name, 'aarch64')
        if (arm === undefined) continue
        for (const args of argsOf) {
          assert.equal(
            verdictName(verdict('aarch64', opts, arm, args)),
            verdictName(verdict('x86_64', opts, x86, args)),
            `${name}(${args.join(', ')})`,
          )
        }
      }
    }
  })

  it('the programs differ only where the architectures do', () => {
    const x86 = seccompProgram('x86_64')
    const arm = seccompProgram('aarch64')
    assert.notDeepEqual(x86, arm)
    assert.equal(x86.readUInt32LE(12), AUDIT_ARCH.x86_64)
    assert.equal(arm.readUInt32LE(12), AUDIT_ARCH.aarch64)
    // The memo keys on the architecture: asking again for x86_64 after arm64 gives x86_64's.
    assert.equal(seccompProgram('x86_64').readUInt32LE(12), AUDIT_ARCH.x86_64)
  })
})
