// The seccomp builder on x86_64: the program's shape, its rules, its encoding and memo. Both architectures'
// verdicts, call by call, are in seccomp-verdicts.test.ts.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { syscallNumber as syscallNumberOf } from '../../src/host/syscalls.js'
import { X86_64_SYSCALLS } from '../../src/host/syscalls-x86_64.js'
import {
  DEFAULT_DENIED,
  ENOSYS_CALLS,
  HOST_IPC_CALLS,
  seccompInstructions as instructionsFor,
  seccompProgram as programFor,
  type SeccompOptions,
  socketFamilies,
} from '../../src/plan/seccomp.js'
import { parsePolicy } from '../../src/policy/schema.js'
import { ALLOW, AUDIT_ARCH, errno, type Insn, KILL_PROCESS, runFilter } from './cbpf.js'

const RET = 0x06
const JMP_CLASS = 0x05
const KILL = KILL_PROCESS

/** What the kernel would answer to the x86_64 program for syscall `nr` with these arguments. */
const evaluate = (
  insns: readonly Insn[],
  nr: number,
  args: readonly number[] = [],
  arch = AUDIT_ARCH.x86_64,
) => runFilter(insns, { nr, arch, args })

const syscallNumber = (name: string) => syscallNumberOf(name, 'x86_64')
const seccompInstructions = (opts: SeccompOptions = {}) => instructionsFor('x86_64', opts)
const seccompProgram = (opts: SeccompOptions = {}) => programFor('x86_64', opts)

const ALL_NUMBERS = Object.values(X86_64_SYSCALLS)

describe('seccomp builder', () => {
  it('knows every default denied name', () => {
    for (const name of DEFAULT_DENIED) assert.ok(syscallNumber(name) !== undefined, name)
    assert.equal(syscallNumber('ptrace'), 101)
    assert.equal(syscallNumber('toString'), undefined)
  })

  it('starts with the architecture check and x32 kill, ends with allow', () => {
    const insns = seccompInstructions()
    assert.deepEqual(insns.slice(0, 6), [
      [0x20, 0, 0, 4],
      [0x15, 1, 0, 0xc000003e],
      [RET, 0, 0, 0x80000000],
      [0x20, 0, 0, 0],
      [0x35, 0, 1, 0x40000000],
      [RET, 0, 0, 0x80000000],
    ])
    assert.deepEqual(insns.at(-1), [RET, 0, 0, 0x7fff0000])
  })

  it('every jump lands inside the program and every path ends in a return', () => {
    const insns = seccompInstructions({ extraDenied: ['socket'] })
    insns.forEach(([code, jt, jf, k], i) => {
      if (code === JMP_CLASS) assert.ok(i + 1 + k < insns.length, `jump at ${i}`)
      else if ((code & 0x07) === JMP_CLASS) {
        assert.ok(i + 1 + jt < insns.length && i + 1 + jf < insns.length, `jump at ${i}`)
      }
    })
    assert.equal(insns.at(-1)![0], RET)
  })

  it('refuses exactly the denied syscalls with EPERM and lets every other number through', () => {
    const insns = seccompInstructions({ extraDenied: ['mkdir', 'mkdirat', 'socket'] })
    const denied = new Set([...DEFAULT_DENIED, 'mkdir', 'mkdirat', 'socket'].map((n) => syscallNumber(n)!))
    const special = new Set(
      [
        ...['clone', 'unshare', 'ioctl', 'personality', 'socketpair', ...ENOSYS_CALLS],
        ...['open', 'openat', 'creat', 'mknod', 'mknodat', 'chmod', 'fchmod', 'fchmodat', 'fchmodat2'],
      ].map((n) => syscallNumber(n)!),
    )
    // Every known number, the gaps between them and past the last one.
    for (let nr = 0; nr <= Math.max(...ALL_NUMBERS) + 2; nr++) {
      if (special.has(nr)) continue
      assert.equal(evaluate(insns, nr), denied.has(nr) ? errno(1) : ALLOW, `syscall ${nr}`)
    }
  })

  it('kernel AIO (io_setup, charged to the host-wide aio-max-nr) and clone3 are ENOSYS: programs fall back', () => {
    const insns = seccompInstructions()
    for (const name of [
      'io_setup',
      'io_destroy',
      'io_submit',
      'io_getevents',
      'io_cancel',
      'io_pgetevents',
    ]) {
      assert.ok(ENOSYS_CALLS.includes(name), name)
      assert.equal(evaluate(insns, syscallNumber(name)!), errno(38), name)
    }
    for (const name of ['io_uring_setup', 'io_uring_enter', 'io_uring_register']) {
      assert.equal(evaluate(insns, syscallNumber(name)!), errno(1), name)
    }
    // A policy denial wins: denySyscalls says EPERM.
    assert.equal(
      evaluate(seccompInstructions({ extraDenied: ['io_setup'] }), syscallNumber('io_setup')!),
      errno(1),
    )
  })

  it('no set-uid or set-gid mode: chmod and the calls that create a file refuse those bits', () => {
    const insns = seccompInstructions()
    const calls: [string, number][] = [
      ['creat', 1],
      ['chmod', 1],
      ['fchmod', 1],
      ['mknod', 1],
      ['open', 2],
      ['mknodat', 2],
      ['fchmodat', 2],
      ['fchmodat2', 2],
      ['openat', 3],
    ]
    for (const [name, arg] of calls) {
      const withMode = (mode: number) => {
        const args = [7, 7, 7, 7]
        args[arg] = mode
        return evaluate(insns, syscallNumber(name)!, args)
      }
      assert.equal(withMode(0o4755), errno(1), `${name} set-uid`)
      assert.equal(withMode(0o2755), errno(1), `${name} set-gid`)
      assert.equal(withMode(0o100000 | 0o6000), errno(1), `${name} S_IFREG | both`)
      assert.equal(withMode(0o1777), ALLOW, `${name} sticky`)
      assert.equal(withMode(0o755), ALLOW, `${name} plain`)
    }
    // Other arguments are not the mode: open's flags (arg 1) may hold any bits.
    assert.equal(evaluate(insns, syscallNumber('open')!, [0, 0o4000 | 0o2000, 0o644]), ALLOW)
    // openat2 carries its mode in memory: ENOSYS, and programs fall back to openat.
    assert.equal(evaluate(insns, syscallNumber('openat2')!, [0, 0, 0, 24]), errno(38))
  })

  it('HOST_IPC_CALLS: every SysV IPC and POSIX message queue call', () => {
    const insns = seccompInstructions({ extraDenied: HOST_IPC_CALLS })
    for (const name of [
      'shmget',
      'shmat',
      'shmctl',
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
    ]) {
      assert.equal(evaluate(insns, syscallNumber(name)!), errno(1), name)
    }
    assert.equal(evaluate(insns, syscallNumber('getpid')!), ALLOW)
  })

  it('adds policy names and ignores duplicates', () => {
    assert.deepEqual(
      seccompInstructions({ extraDenied: ['socket', 'socket', 'ptrace'] }),
      seccompInstructions({ extraDenied: ['socket'] }),
    )
    assert.notDeepEqual(seccompInstructions({ extraDenied: ['socket'] }), seccompInstructions())
  })

  it('checks the architecture and kills x32 calls', () => {
    const insns = seccompInstructions()
    assert.equal(evaluate(insns, 0, [], 0x40000003), KILL, 'i386')
    assert.equal(evaluate(insns, 0x40000000 + 1), KILL, 'x32 write')
  })

  it('refuses new namespaces, clone3, terminal injection and odd personalities; allows the rest', () => {
    const insns = seccompInstructions()
    const nr = (name: string) => syscallNumber(name)!
    assert.equal(evaluate(insns, nr('clone3')), errno(38))
    assert.equal(evaluate(insns, nr('clone'), [0x10000000 | 17]), errno(1), 'clone(CLONE_NEWUSER)')
    assert.equal(evaluate(insns, nr('clone'), [0x01200011]), ALLOW, "fork's clone")
    assert.equal(evaluate(insns, nr('unshare'), [0x00020000]), errno(1), 'unshare(CLONE_NEWNS)')
    assert.equal(evaluate(insns, nr('unshare'), [0x00000400]), ALLOW, 'unshare(CLONE_FILES)')
    assert.equal(evaluate(insns, nr('ioctl'), [0, 0x5412]), errno(1), 'TIOCSTI')
    assert.equal(evaluate(insns, nr('ioctl'), [0, 0x541c]), errno(1), 'TIOCLINUX')
    assert.equal(evaluate(insns, nr('ioctl'), [0, 0x5401]), ALLOW, 'TCGETS')
    assert.equal(evaluate(insns, nr('personality'), [0xffffffff]), ALLOW, 'query')
    assert.equal(evaluate(insns, nr('personality'), [0x0040000]), errno(1), 'ADDR_NO_RANDOMIZE')
  })

  it('is short: the kernel checks and compiles every instruction at each launch (~1 µs each here)', () => {
    // Contiguous numbers share one range check and every refusal one return; socket() and socketpair()
    // share one family check (9 instructions for the four network families); the ENOSYS calls one return;
    // the calls that set a mode share one check per argument (21 instructions).
    assert.ok(seccompInstructions().length <= 93, `${seccompInstructions().length} instructions`)
    assert.ok(
      instructionsFor('aarch64').length <= 85,
      `aarch64: ${instructionsFor('aarch64').length} instructions`,
    )
    assert.ok(
      seccompInstructions({ extraDenied: Object.keys(X86_64_SYSCALLS) }).length < 100,
      'denying every syscall by name stays a short program',
    )
  })

  it('socket families: which a sandbox may open, per tier and network', () => {
    const network = [1, 2, 10, 16] // AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
    for (const net of ['none', 'host', 'allowlist'] as const) {
      assert.deepEqual(socketFamilies('namespace', net), network, `namespace tier, ${net}`)
    }
    assert.deepEqual(socketFamilies('process', 'host'), network)
    // Without a network namespace of its own the process tier is kept off the network by the filter.
    assert.deepEqual(socketFamilies('process', 'none'), [1])
  })

  for (const families of [[1], [1, 2, 10, 16]]) {
    it(`socket() and socketpair() of families ${families.join(',')} only; EAFNOSUPPORT for the rest`, () => {
      const insns = seccompInstructions({ socketFamilies: families })
      for (const call of ['socket', 'socketpair']) {
        const nr = syscallNumber(call)!
        for (let family = 0; family < 256; family++) {
          const want = families.includes(family) ? ALLOW : errno(97)
          assert.equal(evaluate(insns, nr, [family, 1, 0]), want, `${call}(${family})`)
          // The kernel reads the family as an int: high bits are not its, and the filter ignores them too.
          assert.equal(evaluate(insns, nr, [2 ** 32 + family, 1, 0]), want, `${call}(2^32 + ${family})`)
        }
        assert.equal(evaluate(insns, nr, [0xffffffff]), errno(97), `${call}(-1)`)
      }
      // accept, connect and the rest are not touched: they make no socket of a new family.
      for (const other of ['accept', 'accept4', 'connect', 'bind', 'sendmsg', 'recvmsg']) {
        assert.equal(evaluate(insns, syscallNumber(other)!, [40]), ALLOW, other)
      }
    })
  }

  it('the default filter keeps to the network families: no sandbox opens AF_VSOCK, AF_ALG, AF_PACKET', () => {
    const insns = seccompInstructions()
    for (const family of [15, 17, 38, 40]) {
      assert.equal(evaluate(insns, syscallNumber('socket')!, [family, 1, 0]), errno(97), `family ${family}`)
    }
    assert.equal(evaluate(insns, syscallNumber('socket')!, [2, 1, 0]), ALLOW)
  })

  it('policy denials win: a denied socket() is EPERM whatever its family', () => {
    const insns = seccompInstructions({ extraDenied: ['socket'] })
    assert.equal(evaluate(insns, syscallNumber('socket')!, [1, 1, 0]), errno(1))
    assert.equal(evaluate(insns, syscallNumber('socket')!, [40, 1, 0]), errno(1))
  })

  it('the memo keys on the families: programs for one tier never serve another', () => {
    const unix = seccompProgram({ socketFamilies: [1] })
    const network = seccompProgram({ socketFamilies: [1, 2, 10, 16] })
    assert.notDeepEqual(unix, network)
    assert.deepEqual(seccompProgram({ socketFamilies: [1] }), unix)
    assert.deepEqual(seccompProgram({ socketFamilies: [1, 2, 10, 16] }), network)
    assert.deepEqual(seccompProgram({ socketFamilies: [1, 2, 10, 16], extraDenied: [] }), network)
  })

  it('encodes struct sock_filter little-endian, 8 bytes each', () => {
    const buf = seccompProgram()
    assert.equal(buf.length, seccompInstructions().length * 8)
    assert.equal(buf.readUInt16LE(0), 0x20)
    assert.equal(buf.readUInt32LE(4), 4)
    assert.equal(buf.readUInt32LE(12), 0xc000003e)
  })

  it('the schema takes a call of either architecture, whatever this machine is', () => {
    // open is x86_64's only; a policy written there holds on arm64, where open cannot be called at all.
    assert.deepEqual(parsePolicy({ denySyscalls: ['open', 'openat', 'arch_prctl'] }).denySyscalls, [
      'open',
      'openat',
      'arch_prctl',
    ])
    for (const name of ['toString', '__proto__', 'OPEN', ' open']) {
      assert.throws(() => parsePolicy({ denySyscalls: [name] }), PolicyError, name)
    }
  })

  it('the schema refuses an unknown syscall name, naming the field', () => {
    assert.throws(
      () => parsePolicy({ denySyscalls: ['socket', 'not_a_syscall'] }),
      (e: unknown) => e instanceof PolicyError && e.field === 'denySyscalls.1',
    )
  })
})
