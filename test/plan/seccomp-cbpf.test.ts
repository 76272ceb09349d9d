// The BPF interpreter the seccomp tests run programs with (./cbpf.ts), on programs written by hand: each
// instruction's meaning, the fields it loads, and the programs the kernel would refuse to load. Its
// verdicts on cordon's real filter are checked against the kernel's in test/e2e/seccomp.test.ts.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ALLOW, decode, errno, type Insn, KILL_PROCESS, runFilter, validate, verdictName } from './cbpf.js'

const LD = 0x20
const JA = 0x05
const JEQ = 0x15
const JGT = 0x25
const JGE = 0x35
const JSET = 0x45
const RET = 0x06
const YES = 1
const NO = 2

/** `load offset; if <jump> k: YES else NO` */
const test = (offset: number, jump: number, k: number): Insn[] => [
  [LD, 0, 0, offset],
  [jump, 0, 1, k],
  [RET, 0, 0, YES],
  [RET, 0, 0, NO],
]

describe('the BPF interpreter', () => {
  it('loads each word of struct seccomp_data: nr, arch, the instruction pointer, the six arguments', () => {
    const data = {
      nr: 59,
      arch: 0xc00000b7,
      ip: 0x1122334455667788n,
      args: [1, 2 ** 32 + 3, 0xffffffffn << 32n, -1, 0x7fffffff, 0x80000000],
    }
    const words: [number, number][] = [
      [0, 59],
      [4, 0xc00000b7],
      [8, 0x55667788], // little-endian: the low half first
      [12, 0x11223344],
      [16, 1],
      [20, 0],
      [24, 3],
      [28, 1],
      [32, 0],
      [36, 0xffffffff],
      [40, 0xffffffff], // -1 is all ones, both halves
      [44, 0xffffffff],
      [48, 0x7fffffff],
      [52, 0],
      [56, 0x80000000],
      [60, 0],
    ]
    for (const [offset, value] of words) {
      assert.equal(runFilter(test(offset, JEQ, value), data), YES, `word at ${offset} is ${value}`)
      assert.equal(runFilter(test(offset, JEQ, value ^ 1), data), NO, `word at ${offset} is not ${value ^ 1}`)
    }
    // Missing arguments are zero.
    assert.equal(runFilter(test(56, JEQ, 0), { nr: 0, arch: 0 }), YES)
  })

  it('compares unsigned, 32 bits: JEQ, JGT, JGE, JSET', () => {
    const cases: [jump: number, a: number, k: number, taken: boolean][] = [
      [JEQ, 5, 5, true],
      [JEQ, 5, 6, false],
      [JEQ, 0xffffffff, -1, true], // k is 32 bits
      [JGT, 6, 5, true],
      [JGT, 5, 5, false],
      [JGT, 0x80000000, 1, true], // unsigned: not a negative number
      [JGT, 1, 0x80000000, false],
      [JGE, 5, 5, true],
      [JGE, 4, 5, false],
      [JGE, 0xffffffff, 0x80000000, true],
      [JSET, 0b1010, 0b0010, true],
      [JSET, 0b1010, 0b0101, false],
      [JSET, 0x80000000, 0x80000000, true],
    ]
    for (const [jump, a, k, taken] of cases) {
      assert.equal(runFilter(test(0, jump, k), { nr: a, arch: 0 }), taken ? YES : NO, `${jump}: ${a} vs ${k}`)
    }
  })

  it('jumps by jt, jf and JA, counted from the next instruction', () => {
    const program: Insn[] = [
      [LD, 0, 0, 0],
      [JEQ, 2, 0, 7], // nr 7: to the JA
      [JGT, 3, 4, 7], // above 7: RET 30, else RET 40
      [RET, 0, 0, 10],
      [JA, 0, 0, 3], // to RET 50
      [RET, 0, 0, 20],
      [RET, 0, 0, 30],
      [RET, 0, 0, 40],
      [RET, 0, 0, 50],
    ]
    assert.equal(runFilter(program, { nr: 7, arch: 0 }), 50)
    assert.equal(runFilter(program, { nr: 8, arch: 0 }), 30)
    assert.equal(runFilter(program, { nr: 6, arch: 0 }), 40)
  })

  it('returns the 32-bit action of the first return it reaches', () => {
    assert.equal(runFilter([[RET, 0, 0, KILL_PROCESS]], { nr: 0, arch: 0 }), KILL_PROCESS)
    assert.equal(runFilter([[RET, 0, 0, -1]], { nr: 0, arch: 0 }), 0xffffffff)
    assert.equal(verdictName(ALLOW), 'ALLOW')
    assert.equal(verdictName(errno(38)), 'ERRNO(38)')
    assert.equal(verdictName(KILL_PROCESS), 'KILL_PROCESS')
  })

  it('refuses what the kernel would not load, before it runs anything', () => {
    const bad: [string, Insn[], RegExp][] = [
      ['empty', [], /0 instructions/],
      ['too long', Array.from({ length: 4097 }, (): Insn => [RET, 0, 0, 0]), /4097 instructions/],
      ['no final return', [[LD, 0, 0, 0]], /not a return/],
      [
        'a jump past the end',
        [
          [JEQ, 1, 0, 0],
          [RET, 0, 0, 0],
        ],
        /jumps out/,
      ],
      [
        'a false branch past the end',
        [
          [JEQ, 0, 1, 0],
          [RET, 0, 0, 0],
        ],
        /jumps out/,
      ],
      [
        'a JA past the end',
        [
          [JA, 0, 0, 1],
          [RET, 0, 0, 0],
        ],
        /jumps out/,
      ],
      [
        'an unaligned load',
        [
          [LD, 0, 0, 2],
          [RET, 0, 0, 0],
        ],
        /aligned word/,
      ],
      [
        'a load past seccomp_data',
        [
          [LD, 0, 0, 64],
          [RET, 0, 0, 0],
        ],
        /aligned word/,
      ],
      ['BPF_RET | BPF_A', [[0x16, 0, 0, 0]], /code 0x16/],
      [
        'BPF_LD | BPF_IMM',
        [
          [0x00, 0, 0, 0],
          [RET, 0, 0, 0],
        ],
        /code 0x0/,
      ],
      [
        'a jump offset over a byte',
        [
          [JEQ, 256, 0, 0],
          [RET, 0, 0, 0],
        ],
        /out of a byte/,
      ],
    ]
    for (const [name, program, message] of bad) {
      assert.throws(() => validate(program), message, name)
      assert.throws(() => runFilter(program, { nr: 0, arch: 0 }), message, name)
    }
  })

  it('decodes struct sock_filter as the kernel lays it out: u16 code, u8 jt, u8 jf, u32 k, little-endian', () => {
    const buf = Buffer.from('200000000400000015000100b70000c0060000000000ff7f', 'hex')
    assert.deepEqual(decode(buf), [
      [LD, 0, 0, 4],
      [JEQ, 1, 0, 0xc00000b7],
      [RET, 0, 0, ALLOW],
    ])
    assert.throws(() => decode(buf.subarray(0, 12)), /not whole instructions/)
  })
})
