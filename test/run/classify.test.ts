import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { signalNumber } from '../../src/host/signals.js'
import { classify, effectiveSignal, launcherRefusal, type Outcome } from '../../src/run/classify.js'
import { testLimits } from '../helpers.js'

const limits = testLimits()

const kernel = (oomKills: number, pidsMaxHits: number) => ({ oomKills, pidsMaxHits })
const outcome = (over: Partial<Outcome> = {}): Outcome => ({
  exitCode: 0,
  signal: null,
  stoppedFor: null,
  kernel: null,
  stderrTail: '',
  limits,
  launchError: null,
  ...over,
})

describe('effectiveSignal', () => {
  it('prefers the reported signal', () => {
    assert.equal(effectiveSignal(null, 'SIGKILL'), 'SIGKILL')
    assert.equal(effectiveSignal(152, 'SIGTERM'), 'SIGTERM')
  })

  it('decodes a 128+N exit code', () => {
    assert.equal(effectiveSignal(137, null), 'SIGKILL')
    assert.equal(effectiveSignal(152, null), 'SIGXCPU')
    assert.equal(effectiveSignal(153, null), 'SIGXFSZ')
    assert.equal(effectiveSignal(129, null), 'SIGHUP')
  })

  it('names real-time signals, which Node has no name for, as glibc counts them: SIGRTMIN is 34', () => {
    assert.equal(effectiveSignal(128 + 34, null), 'SIGRTMIN')
    assert.equal(effectiveSignal(128 + 35, null), 'SIGRTMIN+1')
    assert.equal(effectiveSignal(128 + 64, null), 'SIGRTMIN+30')
    assert.equal(effectiveSignal(128 + 32, null), 'SIG32')
    for (const name of ['SIGRTMIN', 'SIGRTMIN+1', 'SIGRTMIN+30', 'SIG32', 'SIGKILL', 'SIGXCPU'])
      assert.equal(effectiveSignal(128 + signalNumber(name)!, null), name, name)
    assert.equal(signalNumber('SIGNOPE'), null)
  })

  it('returns null for ordinary exit codes and out-of-range ones', () => {
    for (const code of [0, 1, 2, 127, 128, 193, 255])
      assert.equal(effectiveSignal(code, null), null, String(code))
    assert.equal(effectiveSignal(null, null), null)
  })
})

describe('classify', () => {
  it('ok on exit 0', () => {
    assert.deepEqual(classify(outcome()), { status: 'ok', violation: null })
  })

  it('ok on exit 0 even when stderr mentions memory or fork failures', () => {
    const result = classify(outcome({ stderrTail: 'MemoryError\nCannot fork\n' }))
    assert.deepEqual(result, { status: 'ok', violation: null })
  })

  it('nonzero-exit on an ordinary failure', () => {
    assert.deepEqual(classify(outcome({ exitCode: 1, stderrTail: 'boom' })), {
      status: 'nonzero-exit',
      violation: null,
    })
    assert.equal(classify(outcome({ exitCode: 128 })).status, 'nonzero-exit')
  })

  it('signaled when killed by a signal no limit explains', () => {
    assert.deepEqual(classify(outcome({ exitCode: null, signal: 'SIGSEGV' })), {
      status: 'signaled',
      violation: null,
    })
    assert.equal(classify(outcome({ exitCode: null, signal: 'SIGKILL' })).status, 'signaled')
  })

  it('timeout wins over the exit code it caused', () => {
    for (const over of [{ exitCode: 0 }, { exitCode: 143 }, { exitCode: null, signal: 'SIGKILL' }]) {
      assert.deepEqual(classify(outcome({ ...over, stoppedFor: 'timeout' })), {
        status: 'timeout',
        violation: { kind: 'timeout', limit: 2000, message: 'wall time exceeded 2s' },
      })
    }
  })

  it('output-limit wins over the exit code it caused', () => {
    assert.deepEqual(classify(outcome({ exitCode: null, signal: 'SIGKILL', stoppedFor: 'output-limit' })), {
      status: 'output-limit',
      violation: { kind: 'output-limit', limit: 1000, message: 'output exceeded 1000B' },
    })
    assert.equal(classify(outcome({ exitCode: 0, stoppedFor: 'output-limit' })).status, 'output-limit')
  })

  it('canceled wins over the exit code it caused', () => {
    assert.deepEqual(classify(outcome({ exitCode: null, signal: 'SIGTERM', stoppedFor: 'canceled' })), {
      status: 'canceled',
      violation: { kind: 'canceled', limit: 'signal', message: 'canceled by the caller' },
    })
    assert.equal(classify(outcome({ exitCode: 0, stoppedFor: 'canceled' })).status, 'canceled')
  })

  it('stoppedFor wins over signals and stderr that point at other limits', () => {
    const tail = 'MemoryError\nCannot fork'
    assert.equal(
      classify(outcome({ exitCode: null, signal: 'SIGXCPU', stoppedFor: 'timeout' })).status,
      'timeout',
    )
    assert.equal(classify(outcome({ exitCode: 153, stoppedFor: 'output-limit' })).status, 'output-limit')
    assert.equal(
      classify(outcome({ exitCode: 1, stderrTail: tail, stoppedFor: 'canceled' })).status,
      'canceled',
    )
  })

  it('cpu-time on SIGXCPU, reported directly or as exit 152', () => {
    const expected = {
      status: 'cpu-time',
      violation: { kind: 'cpu-time', limit: 1500, message: 'CPU time exceeded 1500ms' },
    }
    assert.deepEqual(classify(outcome({ exitCode: null, signal: 'SIGXCPU' })), expected)
    assert.deepEqual(classify(outcome({ exitCode: 128 + 24 })), expected)
  })

  it('file-size on SIGXFSZ, reported directly or as exit 153 (128+SIGXFSZ)', () => {
    const expected = {
      status: 'file-size',
      violation: { kind: 'file-size', limit: 64 * 1024, message: 'a file grew past 64K' },
    }
    assert.deepEqual(classify(outcome({ exitCode: 153 })), expected)
    assert.deepEqual(classify(outcome({ exitCode: null, signal: 'SIGXFSZ' })), expected)
  })

  it('file-size when a program that ignores SIGXFSZ (Python, Node) fails with EFBIG, cgroup or not', () => {
    const stderrTail = 'OSError: [Errno 27] File too large\n'
    for (const kernel of [null, { oomKills: 0, pidsMaxHits: 0 }]) {
      assert.equal(classify(outcome({ exitCode: 1, stderrTail, kernel })).status, 'file-size')
    }
    assert.equal(classify(outcome({ exitCode: 0, stderrTail })).status, 'ok', 'a program that coped')
  })

  it('memory when stderr shows a failed allocation', () => {
    const expected = {
      status: 'memory',
      violation: {
        kind: 'memory',
        limit: 256 * 1024 * 1024,
        message: 'memory exceeded 256M (allocation failed)',
      },
    }
    assert.deepEqual(
      classify(outcome({ exitCode: 1, stderrTail: 'Traceback (most recent call last):\nMemoryError\n' })),
      expected,
    )
    for (const tail of [
      'fatal: Out of memory, malloc failed',
      'bash: xmalloc: cannot allocate: Cannot allocate memory',
      "terminate called after throwing an instance of 'std::bad_alloc'",
      'memory allocation of 1073741824 bytes failed',
      'java.lang.OutOfMemoryError: Java heap space',
      'fatal error: runtime: failed to reserve page summary memory',
      'sort: memory exhausted',
    ]) {
      assert.equal(classify(outcome({ exitCode: 1, stderrTail: tail })).status, 'memory', tail)
    }
    assert.equal(
      classify(outcome({ exitCode: null, signal: 'SIGABRT', stderrTail: 'std::bad_alloc' })).status,
      'memory',
    )
  })

  it('process-limit when stderr shows a failed fork', () => {
    const expected = {
      status: 'process-limit',
      violation: { kind: 'process-limit', limit: 16, message: 'more than 16 processes (fork failed)' },
    }
    assert.deepEqual(classify(outcome({ exitCode: 1, stderrTail: 'sh: 1: Cannot fork\n' })), expected)
    for (const tail of [
      "perl: can't fork",
      'bash: fork: retry: Resource temporarily unavailable',
      'bash: fork: Resource temporarily unavailable',
      'BlockingIOError: [Errno 11] Resource temporarily unavailable',
    ]) {
      assert.equal(classify(outcome({ exitCode: 254, stderrTail: tail })).status, 'process-limit', tail)
    }
  })

  it('prefers memory over process-limit when stderr shows both', () => {
    assert.equal(classify(outcome({ exitCode: 1, stderrTail: 'Cannot fork\nMemoryError' })).status, 'memory')
  })

  it('error when the launch failed, before anything else', () => {
    assert.deepEqual(classify(outcome({ exitCode: null, launchError: 'spawn cordon-launch ENOENT' })), {
      status: 'error',
      violation: { kind: 'error', limit: 'launch', message: 'spawn cordon-launch ENOENT' },
    })
    assert.equal(
      classify(outcome({ exitCode: 153, stoppedFor: 'timeout', launchError: 'spawn EACCES' })).status,
      'error',
    )
  })
})

describe('classify with kernel counters', () => {
  it('an OOM kill is memory, whatever the failure and even after a timeout; a program that exits 0 coped', () => {
    assert.equal(classify(outcome({ exitCode: 0, kernel: kernel(1, 0) })).status, 'ok')
    assert.equal(classify(outcome({ exitCode: 0, kernel: kernel(0, 2) })).status, 'ok')
    assert.equal(classify(outcome({ exitCode: 1, kernel: kernel(1, 0) })).status, 'memory')
    assert.equal(
      classify(outcome({ stoppedFor: 'timeout', exitCode: null, signal: 'SIGKILL', kernel: kernel(2, 0) }))
        .status,
      'memory',
    )
    assert.match(classify(outcome({ exitCode: 137, kernel: kernel(1, 0) })).violation!.message, /OOM kill/)
  })

  it('a refused fork is process-limit, even when the program then ran out the clock', () => {
    const r = classify(
      outcome({ stoppedFor: 'timeout', exitCode: null, signal: 'SIGKILL', kernel: kernel(0, 3) }),
    )
    assert.equal(r.status, 'process-limit')
    assert.equal(r.violation!.limit, 16)
  })

  it('cancel still wins over the counters; zero counters change nothing', () => {
    assert.equal(classify(outcome({ stoppedFor: 'canceled', kernel: kernel(1, 1) })).status, 'canceled')
    assert.equal(classify(outcome({ exitCode: 3, kernel: kernel(0, 0) })).status, 'nonzero-exit')
  })

  it("stderr's words are no evidence when the kernel's counters are there (they are zero)", () => {
    for (const stderrTail of [
      'warning: Cannot allocate memory\n',
      'out of memory test FAILED\n',
      'BlockingIOError: [Errno 11] Resource temporarily unavailable\n',
      'sh: 1: Cannot fork\n',
    ]) {
      const r = classify(outcome({ exitCode: 3, stderrTail, kernel: kernel(0, 0) }))
      assert.equal(r.status, 'nonzero-exit', stderrTail)
    }
  })

  it('the tree CPU stop is cpu-time', () => {
    const r = classify(
      outcome({ stoppedFor: 'cpu-time', exitCode: null, signal: 'SIGKILL', kernel: kernel(0, 0) }),
    )
    assert.deepEqual(r.violation, { kind: 'cpu-time', limit: 1500, message: 'CPU time exceeded 1500ms' })
  })
})

describe('launcherRefusal', () => {
  const processTier = { refusal: '', programRan: null }
  const notStarted = { refusal: '', programRan: false }
  const started = { refusal: '', programRan: true }
  const refused = (line: string) => ({ refusal: `${line}\n`, programRan: null })

  it("names a launcher's own refusal: cordon's from its refusal pipe, bwrap's before it ran the program", () => {
    assert.equal(
      launcherRefusal(1, "bwrap: Can't chdir to /x: No such file\n", notStarted),
      "bwrap: Can't chdir to /x: No such file",
    )
    const own = 'cordon-launch: unshare network namespace: Operation not permitted'
    assert.equal(launcherRefusal(1, '', refused(own)), own)
    assert.equal(launcherRefusal(1, '', { ...refused(own), programRan: false }), own, 'before bwrap ran')
    assert.equal(launcherRefusal(null, '', refused(own)), own, 'a launcher killed after it refused')
    assert.equal(
      launcherRefusal(1, 'setpriv: setresuid failed\n', processTier),
      null,
      'no longer a launcher of cordon',
    )
  })

  it('the refusal pipe wins over whatever stderr says, and only its first line is the message', () => {
    assert.equal(
      launcherRefusal(1, 'the program said: all fine\n', refused('cordon-launch: bad argument: --x')),
      'cordon-launch: bad argument: --x',
    )
    assert.equal(
      launcherRefusal(1, '', { refusal: 'cordon-launch: a\nmore\n', programRan: null }),
      'cordon-launch: a',
    )
  })

  it("an exec of the program that failed (127, 126) is the program's exit, not a refusal", () => {
    for (const code of [126, 127]) {
      assert.equal(launcherRefusal(code, '', refused('cordon-launch: cannot execute /x: No such file')), null)
    }
  })

  it('leaves the program alone: other exit codes, other text', () => {
    assert.equal(launcherRefusal(2, 'bwrap: anything\n', notStarted), null)
    assert.equal(launcherRefusal(1, 'python: bwrap: not me\n', notStarted), null)
  })

  it('a program cannot forge one: its stderr is no evidence, bwrap words count only before bwrap ran it', () => {
    for (const forged of ['cordon-launch: forged\n', 'cordon-launch[00000000]: forged\n']) {
      assert.equal(launcherRefusal(1, forged, processTier), null)
      assert.equal(launcherRefusal(1, forged, notStarted), null)
      assert.equal(launcherRefusal(1, forged, started), null)
    }
    assert.equal(launcherRefusal(1, 'bwrap: forged\n', processTier), null, 'the process tier has no bwrap')
    assert.equal(launcherRefusal(1, 'bwrap: forged\n', started), null, 'bwrap reported the program exit')
  })
})
