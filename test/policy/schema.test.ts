import assert from 'node:assert/strict'
import os from 'node:os'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { defaultHide, MiB, parseCommand, parsePolicy } from '../../src/policy/schema.js'

/** Assert that `fn` throws a PolicyError naming `field`, with a message matching `message` when given. */
function throwsField(fn: () => unknown, field: string, message?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof PolicyError, `expected a PolicyError, got ${String(error)}`)
    assert.equal(error.name, 'PolicyError')
    assert.equal(error.field, field)
    assert.ok(error.message.startsWith(`${field}: `), error.message)
    if (message) assert.match(error.message, message)
    return true
  })
}

describe('parsePolicy defaults', () => {
  const expected = {
    limits: {
      wallTimeMs: 30_000,
      cpuTimeMs: 30_000,
      memoryBytes: 512 * MiB,
      maxProcesses: 64,
      maxOpenFiles: 1024,
      maxFileSizeBytes: 256 * MiB,
      maxOutputBytes: 1 * MiB,
      tmpfsBytes: 64 * MiB,
      maxLogBytes: 256 * 1024,
      killGraceMs: 1000,
    },
    env: {},
    passEnv: [],
    writable: [],
    network: 'none',
    allow: [],
    deny: [],
    isolation: 'auto',
    uidPool: { first: 60_000, count: 1000, lockDir: '/run/cordon/uids' },
    redact: [],
    denySyscalls: [],
    cgroup: { mode: 'auto' },
    encoding: 'utf8',
    mergeOutput: false,
  }

  it('fills every default from an empty object', () => {
    assert.deepEqual(parsePolicy({}), expected)
  })

  it("takes encoding 'utf8' or 'buffer', and nothing else", () => {
    assert.equal(parsePolicy({ encoding: 'buffer' }).encoding, 'buffer')
    assert.throws(
      () => parsePolicy({ encoding: 'latin1' }),
      (e: PolicyError) => e.field === 'encoding' && /"utf8", "buffer"/.test(e.message),
    )
  })

  it("leaves hide unset when not given: the namespace tier then hides cordon's home", () => {
    assert.equal(parsePolicy({}).hide, undefined)
    assert.deepEqual(defaultHide(), [os.homedir()])
  })

  it('treats undefined and null as no options', () => {
    assert.deepEqual(parsePolicy(undefined), expected)
    assert.deepEqual(parsePolicy(null), expected)
  })

  it('fills the remaining limits when some are given', () => {
    const policy = parsePolicy({ limits: { wallTimeMs: 5 }, uidPool: { count: 3 } })
    assert.deepEqual(policy.limits, { ...expected.limits, wallTimeMs: 5 })
    assert.deepEqual(policy.uidPool, { ...expected.uidPool, count: 3 })
  })

  it('leaves optional fields absent', () => {
    const policy = parsePolicy({})
    for (const key of ['cwd', 'stdin', 'signal', 'onOutput'] as const) assert.equal(policy[key], undefined)
  })

  it('keeps given values', () => {
    const signal = new AbortController().signal
    const onOutput = () => {}
    const policy = parsePolicy({
      env: { A: '1', _b2: '' },
      passEnv: ['HOME'],
      cwd: '/tmp',
      writable: ['/tmp/x'],
      network: 'host',
      allow: ['ls'],
      deny: ['rm'],
      isolation: 'process',
      stdin: 'input',
      signal,
      onOutput,
    })
    assert.deepEqual(policy.env, { A: '1', _b2: '' })
    assert.deepEqual(policy.passEnv, ['HOME'])
    assert.equal(policy.cwd, '/tmp')
    assert.deepEqual(policy.writable, ['/tmp/x'])
    assert.equal(policy.network, 'host')
    assert.deepEqual(policy.allow, ['ls'])
    assert.deepEqual(policy.deny, ['rm'])
    assert.equal(policy.isolation, 'process')
    assert.equal(policy.stdin, 'input')
    assert.equal(policy.signal, signal)
    assert.equal(policy.onOutput, onOutput)
  })

  it('accepts a Buffer as stdin', () => {
    const stdin = Buffer.from('x')
    assert.equal(parsePolicy({ stdin }).stdin, stdin)
  })
})

describe('parsePolicy sizes and durations', () => {
  it('accepts strings with units', () => {
    const { limits } = parsePolicy({
      limits: {
        wallTimeMs: '2s',
        cpuTimeMs: '1.5s',
        memoryBytes: '256M',
        maxFileSizeBytes: '1G',
        maxOutputBytes: '64K',
        killGraceMs: '500ms',
      },
    })
    assert.equal(limits.wallTimeMs, 2000)
    assert.equal(limits.cpuTimeMs, 1500)
    assert.equal(limits.memoryBytes, 256 * MiB)
    assert.equal(limits.maxFileSizeBytes, 1024 * MiB)
    assert.equal(limits.maxOutputBytes, 64 * 1024)
    assert.equal(limits.killGraceMs, 500)
  })

  it('accepts bare number strings and plain numbers', () => {
    const { limits } = parsePolicy({ limits: { wallTimeMs: '250', memoryBytes: 4096 } })
    assert.equal(limits.wallTimeMs, 250)
    assert.equal(limits.memoryBytes, 4096)
  })

  for (const field of ['wallTimeMs', 'cpuTimeMs', 'killGraceMs'] as const) {
    for (const value of [-1, 0, 1.5, '0s', '0']) {
      it(`rejects ${field}: ${String(value)} naming limits.${field}`, () => {
        throwsField(
          () => parsePolicy({ limits: { [field]: value } }),
          `limits.${field}`,
          /must be a positive whole number of milliseconds/,
        )
      })
    }
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY]) {
      it(`rejects ${field}: ${String(value)} naming limits.${field}`, () => {
        throwsField(() => parsePolicy({ limits: { [field]: value } }), `limits.${field}`)
      })
    }
    for (const value of ['banana', '-1s', '2 parsecs']) {
      it(`rejects ${field}: '${value}' naming limits.${field}`, () => {
        throwsField(() => parsePolicy({ limits: { [field]: value } }), `limits.${field}`, /is not a duration/)
      })
    }
    // Past 2^31-1 ms Node's timers fire at once: a limit there would end the run instead of allowing it.
    it(`rejects ${field} past the longest timer Node keeps (about 24 days), naming limits.${field}`, () => {
      throwsField(() => parsePolicy({ limits: { [field]: '600h' } }), `limits.${field}`, /at most 2147483647/)
      assert.equal(parsePolicy({ limits: { [field]: 2 ** 31 - 1 } }).limits[field], 2 ** 31 - 1)
    })
  }

  for (const field of ['memoryBytes', 'maxFileSizeBytes', 'maxOutputBytes', 'tmpfsBytes'] as const) {
    it(`rejects ${field} past 2^53 bytes, naming limits.${field}`, () => {
      throwsField(() => parsePolicy({ limits: { [field]: 1e20 } }), `limits.${field}`, /at most/)
    })
  }

  for (const field of ['memoryBytes', 'maxFileSizeBytes', 'maxOutputBytes'] as const) {
    it(`rejects ${field}: 'banana' naming limits.${field}`, () => {
      throwsField(
        () => parsePolicy({ limits: { [field]: 'banana' } }),
        `limits.${field}`,
        /"banana" is not a size/,
      )
    })
    for (const value of [-1, 0, 0.5, '0K']) {
      it(`rejects ${field}: ${String(value)} naming limits.${field}`, () => {
        throwsField(
          () => parsePolicy({ limits: { [field]: value } }),
          `limits.${field}`,
          /must be a positive whole number of bytes/,
        )
      })
    }
    it(`rejects ${field} of the wrong type naming limits.${field}`, () => {
      throwsField(() => parsePolicy({ limits: { [field]: true } }), `limits.${field}`)
    })
  }

  for (const value of [0, -3, 2.5, '10']) {
    it(`rejects maxProcesses: ${JSON.stringify(value)} naming limits.maxProcesses`, () => {
      throwsField(() => parsePolicy({ limits: { maxProcesses: value } }), 'limits.maxProcesses')
    })
  }

  for (const [value, message] of [
    [0, /at least 16/],
    [15, /at least 16/],
    [-3, /at least 16/],
    [2.5, /whole number/],
    ['10', /number/],
    [2 ** 20 + 1, /at most 1048576/],
  ] as const) {
    it(`rejects maxOpenFiles: ${JSON.stringify(value)} naming limits.maxOpenFiles`, () => {
      throwsField(() => parsePolicy({ limits: { maxOpenFiles: value } }), 'limits.maxOpenFiles', message)
    })
  }

  it('takes maxOpenFiles from 16 (what bubblewrap needs to set up) to 2^20 (the kernel default nr_open)', () => {
    assert.equal(parsePolicy({ limits: { maxOpenFiles: 16 } }).limits.maxOpenFiles, 16)
    assert.equal(parsePolicy({ limits: { maxOpenFiles: 2 ** 20 } }).limits.maxOpenFiles, 2 ** 20)
  })
})

describe('limits.maxProcesses', () => {
  // Past the kernel's PID_MAX_LIMIT, pids.max refuses the value: refused here, naming the field.
  it('refuses more than 4194304 processes naming limits.maxProcesses', () => {
    throwsField(
      () => parsePolicy({ limits: { maxProcesses: 4_194_305 } }),
      'limits.maxProcesses',
      /at most 4194304/,
    )
    assert.equal(parsePolicy({ limits: { maxProcesses: 4_194_304 } }).limits.maxProcesses, 4_194_304)
  })
})

describe('parsePolicy errors name the field', () => {
  it('names an unknown top-level key', () => {
    throwsField(() => parsePolicy({ bogus: 1 }), 'bogus', /unknown option/)
  })

  it('names an unknown key inside limits', () => {
    throwsField(() => parsePolicy({ limits: { bogus: 1 } }), 'limits.bogus', /unknown option/)
  })

  it('names an unknown key inside uidPool', () => {
    throwsField(() => parsePolicy({ uidPool: { bogus: 1 } }), 'uidPool.bogus', /unknown option/)
  })

  it('names a bad env key and value', () => {
    throwsField(() => parsePolicy({ env: { 'A-B': 'x' } }), 'env.A-B')
    throwsField(() => parsePolicy({ env: { A: 1 } }), 'env.A')
  })

  it('names the passEnv entry that is not a variable name', () => {
    throwsField(() => parsePolicy({ passEnv: ['OK', '1BAD'] }), 'passEnv.1', /environment variable name/)
    // A plain object's __proto__ is its prototype: the variable would vanish without a word.
    throwsField(() => parsePolicy({ passEnv: ['__proto__'] }), 'passEnv.0', /__proto__/)
  })

  it('names empty and NUL-containing paths and commands', () => {
    throwsField(() => parsePolicy({ cwd: '' }), 'cwd', /must not be empty/)
    throwsField(() => parsePolicy({ writable: ['/tmp', ''] }), 'writable.1', /must not be empty/)
    throwsField(() => parsePolicy({ writable: ['a\0b'] }), 'writable.0', /must not contain NUL/)
    throwsField(() => parsePolicy({ allow: [''] }), 'allow.0', /must not be empty/)
    throwsField(() => parsePolicy({ deny: ['ls', 'r\0m'] }), 'deny.1', /must not contain NUL/)
  })

  it('names bad enums', () => {
    throwsField(() => parsePolicy({ network: 'internet' }), 'network')
    throwsField(() => parsePolicy({ isolation: 'vm' }), 'isolation')
  })

  it('names bad stdin, signal and onOutput', () => {
    throwsField(() => parsePolicy({ stdin: 3 }), 'stdin')
    throwsField(() => parsePolicy({ signal: {} }), 'signal', /must be an AbortSignal/)
    throwsField(() => parsePolicy({ onOutput: 'log' }), 'onOutput', /must be a function/)
  })

  it('names bad uidPool fields', () => {
    throwsField(() => parsePolicy({ uidPool: { count: 0 } }), 'uidPool.count')
    throwsField(() => parsePolicy({ uidPool: { first: -1 } }), 'uidPool.first')
    throwsField(() => parsePolicy({ uidPool: { lockDir: 7 } }), 'uidPool.lockDir')
  })

  it('names limits when it is not an object', () => {
    throwsField(() => parsePolicy({ limits: 'fast' }), 'limits')
  })
})

describe('parseCommand', () => {
  it('returns a valid argv unchanged', () => {
    assert.deepEqual(parseCommand(['ls', '-l', '/tmp']), ['ls', '-l', '/tmp'])
  })

  it("names 'command' for an empty argv", () => {
    throwsField(() => parseCommand([]), 'command', /must name a program/)
  })

  it("names 'command.0' for an empty program", () => {
    throwsField(() => parseCommand(['']), 'command.0', /must not be empty/)
  })

  it('names the index of a bad argument; empty arguments are fine, an empty program is not', () => {
    assert.deepEqual(parseCommand(['node', '-e', '']), ['node', '-e', ''])
    throwsField(() => parseCommand(['', 'a']), 'command.0', /must not be empty/)
    throwsField(() => parseCommand(['echo', 'a\0']), 'command.1', /must not contain NUL/)
  })

  it("names 'command' when it is not an array", () => {
    throwsField(() => parseCommand('ls'), 'command')
    throwsField(() => parseCommand(undefined), 'command')
    throwsField(() => parseCommand(null), 'command')
  })
})

describe("the CLI's --net allow: form", () => {
  it('reads hosts, !denied hosts and the three +options', () => {
    assert.deepEqual(parsePolicy({ network: 'allow:pypi.org,!bad.pypi.org,+loopback,+private' }).network, {
      allow: ['pypi.org'],
      deny: ['bad.pypi.org'],
      allowLoopback: true,
      allowPrivate: true,
      allowMetadata: false,
    })
    assert.deepEqual(parsePolicy({ network: 'allow:x.com,+metadata' }).network, {
      allow: ['x.com'],
      deny: [],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: true,
    })
    assert.deepEqual(parsePolicy({ network: { allow: ['x.com'] } }).network, {
      allow: ['x.com'],
      deny: [],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: false,
    })
  })

  it('refuses an unknown +option or an empty !, naming it', () => {
    throwsField(() => parsePolicy({ network: 'allow:pypi.org,+lopback' }), 'network', /\+lopback/)
    throwsField(() => parsePolicy({ network: 'allow:pypi.org,!' }), 'network', /"!"/)
  })
})

describe('every option error names the field, the value and what is accepted', () => {
  for (const [input, field, message] of [
    [{ isolation: 'foo' }, 'isolation', /one of "auto", "namespace", "process", got "foo"/],
    [{ network: 123 }, 'network', /"none", "host" or an allowlist.*got 123/],
    [{ env: { '1x': 'a' } }, 'env.1x', /must be an environment variable name.*got "1x"/],
    [{ env: { A: 1 } }, 'env.A', /must be a string, got 1/],
    [{ limits: { maxProcesses: 1.5 } }, 'limits.maxProcesses', /whole number.*got 1\.5/],
    [{ limits: { maxProcesses: '8' } }, 'limits.maxProcesses', /must be a number, got "8"/],
    [{ writable: 'x' }, 'writable', /must be an array, got "x"/],
    [{ redact: [1] }, 'redact.0', /a string or a RegExp, got 1/],
    [{ stdin: 5 }, 'stdin', /a string, a Buffer or a Readable, got 5/],
    [{ uidPool: { first: 'x' } }, 'uidPool.first', /must be a number, got "x"/],
  ] as const) {
    it(`${JSON.stringify(input)}`, () => {
      throwsField(() => parsePolicy(input), field, message)
      assert.throws(
        () => parsePolicy(input),
        (e: unknown) => e instanceof Error && !/Invalid (input|key|option)/.test(e.message),
      )
    })
  }
})
