import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { DEFAULT_DENIED, seccompInstructions, seccompProgram, syscallNumber } from '../../src/plan/seccomp.js'
import { parsePolicy } from '../../src/policy/schema.js'

const RET = 0x06
const JMP_CLASS = 0x05

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
    insns.forEach(([code, jt, jf], i) => {
      if ((code & 0x07) === JMP_CLASS) {
        assert.ok(i + 1 + jt < insns.length && i + 1 + jf < insns.length, `jump at ${i}`)
      }
    })
    assert.equal(insns.at(-1)![0], RET)
  })

  it('refuses each denied syscall with EPERM', () => {
    const insns = seccompInstructions()
    for (const name of DEFAULT_DENIED) {
      const i = insns.findIndex(([code, , , k]) => code === 0x15 && k === syscallNumber(name))
      assert.ok(i > 0, name)
      assert.deepEqual(insns[i + 1], [RET, 0, 0, 0x00050001], name)
    }
  })

  it('adds policy names and ignores duplicates', () => {
    const base = seccompInstructions().length
    assert.equal(seccompInstructions({ extraDenied: ['socket', 'socket', 'ptrace'] }).length, base + 2)
  })

  it('unixSocketsOnly: socket() of any family but AF_UNIX gets EAFNOSUPPORT, other calls untouched', () => {
    const base = seccompInstructions()
    const insns = seccompInstructions({ unixSocketsOnly: true })
    const socket = syscallNumber('socket')!
    const at = insns.findIndex(([code, , , k]) => code === 0x15 && k === socket)
    assert.ok(at > 0, 'a socket() block')
    assert.deepEqual(insns.slice(at + 1, at + 5), [
      [0x20, 0, 0, 16], // low half of arg 0: the family
      [0x15, 1, 0, 1], // AF_UNIX
      [RET, 0, 0, 0x00050000 | 97],
      [RET, 0, 0, 0x7fff0000],
    ])
    assert.equal(
      base.findIndex(([code, , , k]) => code === 0x15 && k === socket),
      -1,
      'not in the default filter',
    )
    assert.notDeepEqual(
      seccompProgram({ unixSocketsOnly: true }),
      seccompProgram(),
      'the memo keys on the option',
    )
  })

  it('encodes struct sock_filter little-endian, 8 bytes each', () => {
    const buf = seccompProgram()
    assert.equal(buf.length, seccompInstructions().length * 8)
    assert.equal(buf.readUInt16LE(0), 0x20)
    assert.equal(buf.readUInt32LE(4), 4)
    assert.equal(buf.readUInt32LE(12), 0xc000003e)
  })

  it('the schema refuses an unknown syscall name, naming the field', () => {
    assert.throws(
      () => parsePolicy({ denySyscalls: ['socket', 'not_a_syscall'] }),
      (e: unknown) => e instanceof PolicyError && e.field === 'denySyscalls.1',
    )
  })
})
