import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { DATA_RESERVE_BYTES, rlimitArgs } from '../../src/plan/rlimits.js'
import { type Limits, parsePolicy } from '../../src/policy/schema.js'

const limits = (over: Partial<Limits> = {}): Limits => ({ ...parsePolicy({}).limits, ...over })
const noUid = { ownUid: false, overheadProcesses: 0, cgroup: false }

describe('rlimitArgs', () => {
  it('builds the default argument list without nproc', () => {
    assert.deepEqual(rlimitArgs(limits(), noUid), [
      '--cpu=30:31',
      `--fsize=${256 * 1024 * 1024}`,
      '--core=1',
      '--nofile=1024',
      `--data=${512 * 1024 * 1024 + DATA_RESERVE_BYTES}`,
    ])
  })

  it('always limits open files, soft = hard (no cgroup counts them)', () => {
    for (const cgroup of [true, false]) {
      const args = rlimitArgs(limits({ maxOpenFiles: 4096 }), { ownUid: true, overheadProcesses: 2, cgroup })
      assert.ok(args.includes('--nofile=4096'), args.join(' '))
    }
  })

  it('leaves memory and processes to the cgroup when there is one', () => {
    assert.deepEqual(rlimitArgs(limits(), { ownUid: true, overheadProcesses: 2, cgroup: true }), [
      '--cpu=30:31',
      `--fsize=${256 * 1024 * 1024}`,
      '--core=1',
      '--nofile=1024',
    ])
  })

  for (const [ms, soft] of [
    [1000, 1],
    [1001, 2],
    [1500, 2],
    [1999, 2],
    [2000, 2],
    [2001, 3],
    [1, 1],
    [999, 1],
    [60_000, 60],
  ] as const) {
    it(`rounds ${ms}ms of CPU up to ${soft}s soft with hard one second more`, () => {
      const cpu = rlimitArgs(limits({ cpuTimeMs: ms }), noUid).find((a) => a.startsWith('--cpu='))
      assert.equal(cpu, `--cpu=${soft}:${soft + 1}`)
    })
  }

  it('passes memory as RLIMIT_DATA and never RLIMIT_AS', () => {
    const args = rlimitArgs(limits({ memoryBytes: 12345 }), noUid)
    assert.ok(args.includes(`--data=${12345 + DATA_RESERVE_BYTES}`), '--data is memoryBytes + the reserve')
    assert.ok(!args.some((a) => a.startsWith('--as')), "!args.some((a) => a.startsWith('--as'))")
  })

  it('passes the file size limit and turns core dumps off', () => {
    const args = rlimitArgs(limits({ maxFileSizeBytes: 4096 }), noUid)
    assert.ok(args.includes('--fsize=4096'), "args.includes('--fsize=4096')")
    assert.ok(args.includes('--core=1'), "args.includes('--core=1')")
  })

  it('omits nproc when the sandbox shares a uid, whatever the overhead', () => {
    const args = rlimitArgs(limits({ maxProcesses: 5 }), {
      ownUid: false,
      overheadProcesses: 2,
      cgroup: false,
    })
    assert.ok(!args.some((a) => a.startsWith('--nproc')), "!args.some((a) => a.startsWith('--nproc'))")
  })

  it('adds nproc with the overhead when the sandbox has its own uid', () => {
    assert.deepEqual(
      rlimitArgs(limits({ maxProcesses: 5 }), { ownUid: true, overheadProcesses: 2, cgroup: false }),
      [
        '--cpu=30:31',
        `--fsize=${256 * 1024 * 1024}`,
        '--core=1',
        '--nofile=1024',
        `--data=${512 * 1024 * 1024 + DATA_RESERVE_BYTES}`,
        '--nproc=7',
      ],
    )
  })

  it('adds nproc equal to maxProcesses with no overhead', () => {
    const args = rlimitArgs(limits({ maxProcesses: 64 }), {
      ownUid: true,
      overheadProcesses: 0,
      cgroup: false,
    })
    assert.equal(args.at(-1), '--nproc=64')
  })
})
