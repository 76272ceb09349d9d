// A classic BPF interpreter for seccomp programs, as the kernel runs them (kernel/seccomp.c's checks and
// net/core/filter.c's interpreter): a program over one struct seccomp_data, answering a 32-bit action.
// It runs the instructions seccomp accepts that cordon's builder emits and refuses anything else, so a
// filter that uses one it does not know fails its test rather than passing it. The kernel is never
// mocked: test/e2e/seccomp.test.ts checks the interpreter's verdicts against the kernel's on this machine.
// Loading a filter under qemu-user is not possible (seccomp() is ENOSYS there), so an architecture this
// machine is not is tested through this interpreter alone.

/** One struct sock_filter: [code, jt, jf, k]. */
export type Insn = readonly [code: number, jt: number, jf: number, k: number]

export const AUDIT_ARCH = { x86_64: 0xc000003e, aarch64: 0xc00000b7, i386: 0x40000003, arm: 0x40000028 }

/** What the program sees: struct seccomp_data (nr, arch, instruction_pointer, args[6]). */
export interface SeccompData {
  nr: number
  arch: number
  /** Each argument as the 64 bits the kernel passes: numbers above 2^53 as bigints. */
  args?: readonly (number | bigint)[]
  ip?: bigint
}

const BPF_MAXINSNS = 4096
const SECCOMP_DATA_SIZE = 64

/** The data's 32-bit word at byte `offset` (little-endian, as on both architectures cordon filters). */
function word(data: SeccompData, offset: number): number {
  if (offset === 0) return data.nr >>> 0
  if (offset === 4) return data.arch >>> 0
  const u64 = (v: number | bigint | undefined) => BigInt.asUintN(64, BigInt(v ?? 0))
  const value = offset < 16 ? u64(data.ip) : u64(data.args?.[Math.floor((offset - 16) / 8)])
  return Number(offset % 8 === 0 ? value & 0xffffffffn : value >> 32n)
}

/**
 * The action `program` returns for `data`. Throws on what the kernel would refuse to load (an unknown
 * instruction, a load outside struct seccomp_data or unaligned, a jump out of the program, a last
 * instruction that is not a return), so a broken program never yields a verdict. `visited` collects the
 * index of every instruction run, so a table of cases can show it reaches every rule.
 */
export function runFilter(program: readonly Insn[], data: SeccompData, visited?: Set<number>): number {
  if (!valid.has(program)) {
    validate(program)
    valid.add(program)
  }
  let a = 0
  for (let pc = 0; ; ) {
    visited?.add(pc)
    const [code, jt, jf, k] = program[pc++]!
    const K = k >>> 0
    switch (code) {
      case LD_ABS:
        a = word(data, K)
        break
      case JA:
        pc += K
        break
      case JEQ:
        pc += a === K ? jt : jf
        break
      case JGT:
        pc += a > K ? jt : jf
        break
      case JGE:
        pc += a >= K ? jt : jf
        break
      case JSET:
        pc += (a & K) !== 0 ? jt : jf
        break
      case RET:
        return K
    }
  }
}

// The instructions cordon's builder emits; validate() refuses any other, so the switch above is complete.
const LD_ABS = 0x20 // BPF_LD | BPF_W | BPF_ABS
const JA = 0x05 // BPF_JMP | BPF_JA
const JEQ = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
const JGT = 0x25
const JGE = 0x35
const JSET = 0x45
const RET = 0x06 // BPF_RET | BPF_K
const CODES = new Set([LD_ABS, JA, JEQ, JGT, JGE, JSET, RET])
const CONDITIONAL = new Set([JEQ, JGT, JGE, JSET])

/** Programs already validated: the same array is run over whole tables of calls. */
const valid = new WeakSet<readonly Insn[]>()

/** What the kernel checks before it loads a program (bpf_check_classic and seccomp_check_filter). */
export function validate(program: readonly Insn[]): void {
  if (program.length === 0 || program.length > BPF_MAXINSNS) {
    throw new Error(`a program of ${program.length} instructions`)
  }
  program.forEach(([code, jt, jf, k], i) => {
    if (!CODES.has(code))
      throw new Error(`instruction ${i}: code 0x${code.toString(16)} is not one this interpreter runs`)
    if (!(jt >= 0 && jt <= 0xff && jf >= 0 && jf <= 0xff))
      throw new Error(`instruction ${i}: jump offsets out of a byte`)
    if (code === LD_ABS && ((k >>> 0) % 4 !== 0 || (k >>> 0) + 4 > SECCOMP_DATA_SIZE)) {
      throw new Error(`instruction ${i}: load at ${k}, not an aligned word of struct seccomp_data`)
    }
    const lands = (offset: number) => i + 1 + offset < program.length
    if ((code === JA && !lands(k >>> 0)) || (CONDITIONAL.has(code) && !(lands(jt) && lands(jf)))) {
      throw new Error(`instruction ${i}: jumps out of the program`)
    }
  })
  if (program.at(-1)![0] !== RET) throw new Error('the last instruction is not a return')
}

/** Decode struct sock_filter[] as the kernel reads it (little-endian, 8 bytes each). */
export function decode(buf: Buffer): Insn[] {
  if (buf.length % 8 !== 0) throw new Error(`${buf.length} bytes: not whole instructions`)
  const out: Insn[] = []
  for (let i = 0; i < buf.length; i += 8) {
    out.push([buf.readUInt16LE(i), buf.readUInt8(i + 2), buf.readUInt8(i + 3), buf.readUInt32LE(i + 4)])
  }
  return out
}

/** The actions, as seccomp(2) names them. */
export const ALLOW = 0x7fff0000
export const KILL_PROCESS = 0x80000000
export const errno = (n: number) => 0x00050000 | n

/** A verdict as words, for assertion messages: "ALLOW", "ERRNO(1)", "KILL_PROCESS". */
export function verdictName(action: number): string {
  if (action === ALLOW) return 'ALLOW'
  if (action === KILL_PROCESS) return 'KILL_PROCESS'
  if (action >>> 16 === 0x0005) return `ERRNO(${action & 0xffff})`
  return `0x${action.toString(16)}`
}
