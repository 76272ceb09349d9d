// outcome(): what the supervisor saw of a run's end, turned into the result's status. Pure: no processes.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type Happened, outcome } from '../../src/run/outcome.js'
import { testLimits } from '../helpers.js'

const limits = testLimits()

const happened = (over: Partial<Happened> = {}): Happened => ({
  tier: 'namespace',
  exit: { code: 0, signal: null },
  stoppedFor: null,
  kernel: null,
  stderrTail: '',
  limits,
  launchError: null,
  refusal: '',
  programRan: true,
  ...over,
})
const exit = (code: number | null, signal: string | null = null) => ({ exit: { code, signal } })

describe('outcome', () => {
  it('ok on a clean exit, nonzero-exit on an ordinary failure', () => {
    assert.deepEqual(outcome(happened()), {
      status: 'ok',
      violation: null,
      exitCode: 0,
      signal: null,
      programError: null,
    })
    const failed = outcome(happened(exit(3)))
    assert.equal(failed.status, 'nonzero-exit')
    assert.equal(failed.exitCode, 3)
  })

  it("undoes bwrap's 128+N report of a signal death in the namespace tier", () => {
    const killed = outcome(happened(exit(137)))
    assert.equal(killed.exitCode, null)
    assert.equal(killed.signal, 'SIGKILL')
    assert.equal(killed.status, 'signaled')
    assert.equal(outcome(happened(exit(152))).status, 'cpu-time')
    // 128 itself is no signal.
    assert.equal(outcome(happened(exit(128))).exitCode, 128)
  })

  it("in the process tier undoes only a real-time signal's 128+N (the monitor passes the rest on as itself)", () => {
    const process = { tier: 'process' as const }
    const exited = outcome(happened({ ...process, ...exit(137) }))
    assert.equal(exited.exitCode, 137)
    assert.equal(exited.signal, null)
    assert.equal(exited.status, 'nonzero-exit')
    const rt = outcome(happened({ ...process, ...exit(128 + 34) }))
    assert.equal(rt.exitCode, null)
    assert.equal(rt.signal, 'SIGRTMIN')
    assert.equal(rt.status, 'signaled')
  })

  it('keeps a signal Node reported as it is', () => {
    const o = outcome(happened(exit(null, 'SIGTERM')))
    assert.deepEqual([o.exitCode, o.signal, o.status], [null, 'SIGTERM', 'signaled'])
  })

  it("a launcher's refusal on its pipe is an error, whatever the program printed", () => {
    const o = outcome(
      happened({ ...exit(1), refusal: 'cannot bind /nope: No such file\nmore', stderrTail: 'bwrap: not me' }),
    )
    assert.equal(o.status, 'error')
    assert.deepEqual(o.violation, {
      kind: 'error',
      limit: 'launch',
      message: 'cannot bind /nope: No such file',
    })
    assert.equal(o.programError, null)
  })

  it("a failed exec of the program is the program's exit: its reason goes to stderr, and counts there", () => {
    const missing = outcome(happened({ ...exit(127), refusal: 'exec /bin/nope: No such file or directory' }))
    assert.equal(missing.status, 'nonzero-exit')
    assert.equal(missing.exitCode, 127)
    assert.equal(missing.violation, null)
    assert.equal(missing.programError, 'exec /bin/nope: No such file or directory')
    // Classified with those words as stderr written last (no cgroup: a failed allocation reads as memory).
    const noMemory = outcome(happened({ ...exit(126), refusal: 'exec /bin/big: Cannot allocate memory' }))
    assert.equal(noMemory.status, 'memory')
    assert.equal(noMemory.programError, 'exec /bin/big: Cannot allocate memory')
  })

  it("bwrap's refusal (exit 1, bwrap: on stderr) counts only when it never ran the program", () => {
    const said = {
      ...exit(1),
      stderrTail: "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n",
    }
    const refused = outcome(happened({ ...said, programRan: false }))
    assert.equal(refused.status, 'error')
    assert.match(refused.violation?.message ?? '', /^bwrap: Can't mount proc/)
    assert.equal(outcome(happened({ ...said, programRan: true })).status, 'nonzero-exit')
    // The process tier has no bwrap: a program that prints the same is only failing.
    assert.equal(outcome(happened({ ...said, tier: 'process', programRan: false })).status, 'nonzero-exit')
  })

  it("spawn's own error wins over a refusal", () => {
    const o = outcome(
      happened({ ...exit(1), launchError: 'could not launch x: E2BIG', refusal: 'cannot bind /nope' }),
    )
    assert.deepEqual(o.violation, { kind: 'error', limit: 'launch', message: 'could not launch x: E2BIG' })
  })

  it('a limit or timer that ended the run wins over the exit it caused', () => {
    const stopped = (stoppedFor: Happened['stoppedFor']) =>
      outcome(happened({ ...exit(null, 'SIGKILL'), stoppedFor })).status
    assert.equal(stopped('timeout'), 'timeout')
    assert.equal(stopped('output-limit'), 'output-limit')
    assert.equal(stopped('cpu-time'), 'cpu-time')
    assert.equal(stopped('canceled'), 'canceled')
    const oom = outcome(happened({ ...exit(137), kernel: { oomKills: 1, pidsMaxHits: 0 } }))
    assert.equal(oom.status, 'memory')
    assert.equal(oom.signal, 'SIGKILL')
  })
})
