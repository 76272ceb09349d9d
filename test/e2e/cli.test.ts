// The built CLI, run as a user would: exit codes, live streaming, --json, flag errors.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { marker, noNamespace, processesWith, tempDir, waitFor } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const cordon = (args: string[], input?: string) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input, timeout: 30_000 })

/** The CLI run alongside the test, for when something else (a FIFO's writer) must run at the same time. */
async function cordonAsync(
  args: string[],
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  const status = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(timer)
  return { status, stdout, stderr }
}

/** Sandbox cgroups a cordon process made (named cordon-<its pid>-…) that are still there. */
function cgroupsOf(pid: number): string[] {
  const found = spawnSync('find', ['/sys/fs/cgroup', '-maxdepth', '8', '-name', `cordon-${pid}-*`], {
    encoding: 'utf8',
  })
  return found.stdout.split('\n').filter(Boolean)
}

/** The tier `--isolation auto` picks on this machine. */
const AUTO_TIER = noNamespace ? 'process' : 'namespace'

describe('cordon run', () => {
  it('passes the child exit code and streams both outputs', () => {
    const r = cordon(['run', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3'])
    assert.equal(r.status, 3)
    assert.equal(r.stdout, 'out\n')
    assert.equal(r.stderr, 'err\n')
  })

  it('128+N when the program dies of a signal on its own', () => {
    assert.equal(cordon(['run', '--', 'sh', '-c', 'kill -9 $$']).status, 137)
  })

  it('124 and a one-line summary on stderr when a limit is hit', () => {
    const r = cordon(['run', '--timeout', '200ms', '--', 'sleep', '10'])
    assert.equal(r.status, 124)
    assert.equal(r.stderr, 'cordon: timeout: wall time exceeded 200ms\n')
  })

  it('126 when denied, 127 when not found', () => {
    assert.equal(cordon(['run', '--deny', 'rm', '--', 'rm', '/nothing']).status, 126)
    assert.equal(cordon(['run', '--', 'no-such-program-xyz']).status, 127)
    const plain = path.join(tempDir('cordon-exec-', { mode: 0o755 }), 'plain.sh')
    writeFileSync(plain, 'echo never\n', { mode: 0o644 })
    const notExecutable = cordon(['run', '--', plain])
    assert.equal(notExecutable.status, 126)
    assert.match(notExecutable.stderr, /Permission denied/)
    const directory = cordon(['run', '--', path.dirname(plain)])
    assert.equal(directory.status, 126)
    assert.match(directory.stderr, /Is a directory/)
  })

  for (const [args, flag] of [
    [['--bogus'], '--bogus'],
    [['--timeout', '-1s'], '--timeout'],
    [['--memory', 'banana'], '--memory'],
    [['--max-procs', 'many'], '--max-procs'],
    [['--cwd', '/does/not/exist'], '--cwd'],
    [['--allow', 'no-such-program-xyz'], '--allow'],
    [['--deny', 'no-such-program-xyz'], '--deny'],
    [['--net', 'sometimes'], '--net'],
    [['--env', 'NOEQUALS'], '--env'],
    [['--stdin', '/does/not/exist'], '--stdin'],
  ] as const) {
    it(`125 naming ${flag} for ${args.join(' ')}`, () => {
      const r = cordon(['run', ...args, '--', 'true'])
      assert.equal(r.status, 125)
      assert.ok(r.stderr.includes(flag), r.stderr)
      assert.equal(r.stdout, '', 'without --json a usage error prints nothing on stdout')
    })
  }

  for (const [args, flag, isolation] of [
    [['--json', '--bogus'], '--bogus', AUTO_TIER],
    [['--bogus', '--json'], '--bogus', AUTO_TIER],
    [['--json', '--memory', 'banana'], '--memory', AUTO_TIER],
    [['--json', '--cwd', '/does/not/exist'], '--cwd', AUTO_TIER],
    [['--isolation', 'process', '--json', '--memory', 'banana'], '--memory', 'process'],
    [['--isolation=namespace', '--json', '--stdin', '/does/not/exist'], '--stdin', 'namespace'],
  ] as const) {
    it(`--json: 125 and one error result naming ${flag} for ${args.join(' ')}`, () => {
      const r = cordon(['run', ...args, '--', 'true'])
      assert.equal(r.status, 125)
      assert.ok(r.stderr.includes(flag), `the message still goes to stderr: ${r.stderr}`)
      const lines = r.stdout.split('\n')
      assert.equal(lines.length, 2, `exactly one line on stdout: ${JSON.stringify(r.stdout)}`)
      assert.equal(lines[1], '')
      const result = JSON.parse(lines[0]!)
      const { violation, ...rest } = result
      assert.equal(violation.kind, 'error')
      assert.equal(violation.limit, flag)
      assert.ok(typeof violation.message === 'string' && violation.message.length > 0, violation.message)
      assert.ok(!violation.message.startsWith('cordon:'), violation.message)
      assert.deepEqual(rest, {
        status: 'error',
        exitCode: null,
        signal: null,
        stdout: '',
        stderr: '',
        output: '',
        truncated: false,
        outputBytes: 0,
        wallMs: 0,
        cpuMs: null,
        maxRssBytes: null,
        isolation,
        perProcessLimits: [],
        logs: [],
        logsTruncated: false,
        network: [],
        networkDropped: 0,
      })
    })
  }

  it("--json after -- is the program's argument, not a request for a JSON error", () => {
    const r = cordon(['run', '--memory', 'banana', '--', 'echo', '--json'])
    assert.equal(r.status, 125)
    assert.equal(r.stdout, '')
  })

  it('125 for an empty command', () => {
    const r = cordon(['run', '--', ''])
    assert.equal(r.status, 125)
    assert.match(r.stderr, /command/)
  })

  it('--json prints exactly one result object on stdout', () => {
    const r = cordon(['run', '--json', '--max-output', '10B', '--', 'sh', '-c', 'echo 0123456789abcdef'])
    assert.equal(r.status, 124)
    const lines = r.stdout.trim().split('\n')
    assert.equal(lines.length, 1)
    const result = JSON.parse(lines[0]!)
    assert.equal(result.status, 'output-limit')
    assert.equal(result.stdout, '0123456789')
    assert.equal(r.stderr, '')
  })

  it('stdin: a pipe goes through without --stdin, EOF with none, forwarded with -, read from a file', () => {
    assert.equal(cordon(['run', '--', 'cat'], 'through').stdout, 'through')
    assert.equal(cordon(['run', '--stdin', 'none', '--', 'cat'], 'ignored').stdout, '')
    assert.equal(cordon(['run', '--stdin', '-', '--', 'cat'], 'piped').stdout, 'piped')
    const file = path.join(tempDir('cordon-stdin-', { mode: 0o755 }), 'input')
    writeFileSync(file, 'from file')
    assert.equal(cordon(['run', '--stdin', file, '--', 'cat']).stdout, 'from file')
  })

  it('--stdin reads a character device', () => {
    const r = cordon(['run', '--stdin', '/dev/null', '--', 'cat'])
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, '')
  })

  it('--stdin reads a FIFO that another process feeds', async () => {
    const fifo = path.join(tempDir('cordon-fifo-'), 'fifo')
    const made = spawnSync('mkfifo', [fifo], { encoding: 'utf8' })
    assert.equal(made.status, 0, made.stderr)
    const writer = spawn('tee', [fifo], { stdio: ['pipe', 'ignore', 'inherit'] })
    writer.stdin.end('from fifo')
    const r = await cordonAsync(['run', '--stdin', fifo, '--', 'cat'])
    writer.kill()
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, 'from fifo')
  })

  it('--stdin is still 125 for a directory', () => {
    const r = cordon(['run', '--stdin', tempDir('cordon-stdin-dir-'), '--', 'cat'])
    assert.equal(r.status, 125)
    assert.ok(r.stderr.includes('--stdin'), r.stderr)
  })

  for (const stream of ['stdout', 'stderr'] as const) {
    it(`141, quietly, and the sandbox stopped when the reader closes cordon's ${stream}`, async () => {
      const tag = marker()
      const loop = `while :; do echo x${stream === 'stderr' ? ' >&2' : ''}; sleep .01; done`
      const child = spawn(process.execPath, [CLI, 'run', '--', 'sh', '-c', loop, tag])
      const other = stream === 'stdout' ? child.stderr : child.stdout
      let printed = ''
      other.setEncoding('utf8').on('data', (s: string) => (printed += s))
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
      try {
        await new Promise((resolve) => child[stream].once('data', resolve))
        child[stream].destroy()
        // 'close': exited, and everything it printed read.
        const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
        assert.equal(code, 141, printed)
        assert.equal(printed, '', `nothing printed after the ${stream} closed`)
        assert.deepEqual(processesWith(tag), [], 'the sandbox is gone')
        assert.deepEqual(cgroupsOf(child.pid!), [], 'its cgroup is removed')
      } finally {
        clearTimeout(timer)
        for (const pid of processesWith(tag)) process.kill(pid, 'SIGKILL')
      }
    })
  }

  it("passes the program's bytes through unchanged: gzip's output gunzips, 4096 random bytes exactly", () => {
    const dir = tempDir('cordon-bytes-', { mode: 0o755 })
    const bytes = randomBytes(4096)
    writeFileSync(path.join(dir, 'f'), bytes, { mode: 0o644 })
    const raw = (args: string[]) => spawnSync(process.execPath, [CLI, 'run', '--cwd', dir, '--', ...args])
    const gz = raw(['gzip', '-c', 'f'])
    assert.equal(gz.status, 0, gz.stderr.toString())
    assert.deepEqual(gunzipSync(gz.stdout), bytes)
    const out = raw(['cat', 'f'])
    assert.deepEqual(out.stdout, bytes)
    assert.equal(out.stdout.length, 4096)
    const err = raw(['sh', '-c', 'cat f >&2'])
    assert.deepEqual(err.stderr, bytes)
    assert.equal(err.stdout.length, 0)
  })

  it('--merge-output: stdout and stderr are one stream, in the order written, on stdout', () => {
    const r = cordon(['run', '--merge-output', '--', 'sh', '-c', 'echo 1; echo 2 >&2; echo 3; echo 4 >&2'])
    assert.equal(r.status, 0)
    assert.equal(r.stdout, '1\n2\n3\n4\n')
    assert.equal(r.stderr, '')
    const json = JSON.parse(
      cordon(['run', '--json', '--merge-output', '--', 'sh', '-c', 'echo 1; echo 2 >&2']).stdout,
    )
    assert.deepEqual([json.output, json.stdout, json.stderr], ['1\n2\n', '1\n2\n', ''])
  })

  it('streams output live, before the program ends', async () => {
    const child = spawn(process.execPath, [CLI, 'run', '--', 'sh', '-c', 'echo early; sleep 2; echo late'])
    const t0 = Date.now()
    const firstAt = await new Promise<number>((resolve) =>
      child.stdout.once('data', () => resolve(Date.now() - t0)),
    )
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    assert.equal(code, 0)
    assert.ok(Date.now() - t0 - firstAt > 1000, `first output ${firstAt} ms after start`)
  })
})

describe('cordon run/call: secrets by name and from files, never in an argv', () => {
  const dir = tempDir('cordon-envfile-', { mode: 0o755 })
  let n = 0
  /** A file of these lines, readable by cordon only. */
  const envFrom = (...lines: string[]) => {
    const file = path.join(dir, `env-${n++}`)
    writeFileSync(file, lines.join('\n'), { mode: 0o600 })
    return file
  }
  const secret = () => `s3cr3t-${randomBytes(12).toString('hex')}`
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')
  /** Prints each variable's sha256 (never the value itself, which would be redacted). */
  const hashes = (...names: string[]) => [
    'sh',
    '-c',
    names.map((name) => `printf %s "$${name}" | sha256sum | cut -c1-64`).join('; '),
  ]
  const withEnv = (args: string[], env: Record<string, string>) =>
    spawnSync(process.execPath, [CLI, ...args], {
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, ...env },
    })

  it("--env NAME takes the value from cordon's own environment", () => {
    const value = secret()
    const r = withEnv(['run', '--env', 'DB_PASSWORD', '--', ...hashes('DB_PASSWORD')], { DB_PASSWORD: value })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, `${sha256(value)}\n`)
  })

  it('--env __proto__ is refused, not dropped without a word', () => {
    for (const arg of ['__proto__=x', '__proto__']) {
      const r = cordon(['run', '--env', arg, '--', 'true'])
      assert.equal(r.status, 125)
      assert.match(r.stderr, /--env: __proto__/)
    }
  })

  it('--env NAME of a variable cordon does not have: 125 naming --env and the variable', () => {
    const env = { ...process.env }
    delete env.CORDON_TEST_UNSET_VAR
    const r = spawnSync(process.execPath, [CLI, 'run', '--env', 'CORDON_TEST_UNSET_VAR', '--', 'true'], {
      encoding: 'utf8',
      env,
    })
    assert.equal(r.status, 125)
    assert.match(r.stderr, /--env/)
    assert.match(r.stderr, /CORDON_TEST_UNSET_VAR/)
  })

  it('--env-from: NAME=VALUE lines, comments, blank lines, export, one pair of quotes; values verbatim', () => {
    const file = envFrom(
      '\uFEFF# a comment after a byte order mark',
      '',
      '   ',
      'PLAIN=a b  # not a comment',
      'export EXPORTED=x',
      `  SINGLE='it''s=$HOME'`,
      'DOUBLE="say \\"hi\\" $HOME"',
      'EMPTY=',
      'EQUALS=a=b=c',
      'CRLF=line\r',
      'LAST=wins-not',
      'LAST=wins',
      'BOM_AT_START_ONLY=\uFEFFkept',
    )
    const names = [
      'PLAIN',
      'EXPORTED',
      'SINGLE',
      'DOUBLE',
      'EMPTY',
      'EQUALS',
      'CRLF',
      'LAST',
      'BOM_AT_START_ONLY',
    ]
    const r = cordon(['run', '--env-from', file, '--', ...hashes(...names)])
    assert.equal(r.status, 0, r.stderr)
    const want = [
      'a b  # not a comment',
      'x',
      "it''s=$HOME",
      'say \\"hi\\" $HOME',
      '',
      'a=b=c',
      'line',
      'wins',
      '\uFEFFkept',
    ]
    assert.equal(r.stdout, want.map((v) => `${sha256(v)}\n`).join(''))
  })

  it('several --env-from: a later file wins; an explicit --env wins over every file', () => {
    const a = envFrom('A=from-a', 'B=from-a', 'C=from-a')
    const b = envFrom('B=from-b', 'C=from-b')
    const r = withEnv(
      ['run', '--env-from', a, '--env-from', b, '--env', 'C=explicit', '--', ...hashes('A', 'B', 'C')],
      {},
    )
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, ['from-a', 'from-b', 'explicit'].map((v) => `${sha256(v)}\n`).join(''))
    const named = withEnv(['run', '--env', 'C', '--env-from', b, '--', ...hashes('C')], { C: 'mine' })
    assert.equal(named.stdout, `${sha256('mine')}\n`, 'the order of the flags does not matter')
  })

  for (const [lines, where] of [
    [['OK=1', 'NOT AN ASSIGNMENT'], ':2:'],
    [['OK=1', '', '1BAD=x'], ':3:'],
    [['SPACE =x'], ':1:'],
    [['Q="unterminated'], ':1:'],
    [['Q=\'mixed"'], ':1:'],
    [['export'], ':1:'],
    [['NUL=a\0b'], ':1:'],
    [['__proto__=x'], ':1:'],
  ] as const) {
    it(`--env-from: 125 naming --env-from and ${where} for ${JSON.stringify(lines.at(-1))}`, () => {
      const file = envFrom(...lines)
      for (const json of [false, true]) {
        const r = cordon(['run', ...(json ? ['--json'] : []), '--env-from', file, '--', 'true'])
        assert.equal(r.status, 125)
        assert.ok(r.stderr.includes(`--env-from: ${file}${where}`), r.stderr)
        if (json) assert.equal(JSON.parse(r.stdout).violation.limit, '--env-from')
      }
    })
  }

  it('--env-from: a line that is not an assignment is not echoed (it may be a pasted secret)', () => {
    const value = secret()
    for (const line of [value, `${value.replace('-', '+')}==`]) {
      const r = cordon(['run', '--env-from', envFrom(line), '--', 'true'])
      assert.equal(r.status, 125)
      assert.ok(!r.stderr.includes(value.slice(8)), r.stderr)
    }
  })

  it('--env-from of a missing file or a directory: 125 naming --env-from', () => {
    for (const file of [path.join(dir, 'missing'), dir]) {
      const r = cordon(['run', '--env-from', file, '--', 'true'])
      assert.equal(r.status, 125)
      assert.ok(r.stderr.includes(`--env-from: ${file}`), r.stderr)
    }
  })

  it("no flag of cordon's starts with --env-file, which Node itself would take (nodejs/node#54232)", () => {
    for (const sub of ['run', 'call']) {
      const help = cordon([sub, '--help'])
      assert.equal(help.status, 0, help.stderr)
      assert.match(help.stdout, /--env-from <FILE>/)
      assert.doesNotMatch(help.stdout, /--env-file/)
    }
  })

  it('a subcommand built alone helps as it does among all of them', () => {
    // `cordon SUB` builds only SUB's commander command; `cordon help SUB` builds them all.
    const all = cordon(['--help'])
    assert.equal(all.status, 0, all.stderr)
    for (const sub of ['run', 'call', 'rootfs', 'doctor', 'serve', 'mcp', 'keys']) {
      assert.match(all.stdout, new RegExp(`^  ${sub}\\b`, 'm'))
      const alone = cordon([sub, '--help'])
      assert.equal(alone.status, 0, alone.stderr)
      assert.equal(alone.stdout, cordon(['help', sub]).stdout)
    }
  })

  it('values whose names look secret are redacted from the output', () => {
    const value = secret()
    const r = cordon([
      'run',
      '--env-from',
      envFrom(`DB_PASSWORD=${value}`),
      '--',
      'sh',
      '-c',
      'echo "pw=$DB_PASSWORD"',
    ])
    assert.equal(r.stdout, 'pw=[REDACTED]\n')
  })

  it("the values appear in no process's argv while the sandbox runs (cordon's own included)", async () => {
    const fromFile = secret()
    const fromEnv = secret()
    const tag = marker()
    const child = spawn(
      process.execPath,
      [
        CLI,
        'run',
        '--env-from',
        envFrom(`DB_PASSWORD=${fromFile}`),
        '--env',
        'API_TOKEN',
        '--',
        'sleep',
        tag,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, API_TOKEN: fromEnv } },
    )
    const closed = new Promise((resolve) => child.on('close', resolve))
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    try {
      // The program itself: cordon's own argv holds the tag too.
      const sleeping = () =>
        processesWith(tag).some((pid) => {
          try {
            return readFileSync(`/proc/${pid}/comm`, 'utf8') === 'sleep\n'
          } catch {
            return false
          }
        })
      assert.ok(await waitFor(sleeping, 10_000), 'the sandbox started')
      const cli = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8')
      assert.ok(cli.includes('API_TOKEN') && !cli.includes(fromEnv) && !cli.includes(fromFile), cli)
      for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
        let cmdline = ''
        try {
          cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        } catch {
          continue // exited while we looked
        }
        assert.ok(!cmdline.includes(fromFile) && !cmdline.includes(fromEnv), `pid ${pid}: ${cmdline}`)
      }
    } finally {
      child.kill('SIGINT')
      await closed
      clearTimeout(timer)
    }
  })

  it('cordon call takes --env NAME and --env-from too', () => {
    const mod = path.join(dir, 'env.mjs')
    writeFileSync(mod, 'export const read = (...names) => names.map((n) => process.env[n] ?? null)\n')
    chmodSync(mod, 0o644)
    const r = withEnv(
      [
        'call',
        `${mod}#read`,
        '--args',
        '["FROM_FILE", "FROM_ENV"]',
        '--json',
        '--env-from',
        envFrom('FROM_FILE=f'),
        '--env',
        'FROM_ENV',
      ],
      { FROM_ENV: 'e' },
    )
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(JSON.parse(r.stdout).value, ['f', 'e'])
    const bad = cordon(['call', `${mod}#read`, '--env-from', envFrom('nope')])
    assert.equal(bad.status, 125)
    assert.match(bad.stderr, /--env-from: .*:1:/)
  })
})

describe('cordon --version', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
  for (const flag of ['--version', '-V']) {
    it(`${flag} prints the package version`, () => {
      const r = cordon([flag])
      assert.equal(r.status, 0, r.stderr)
      assert.equal(r.stdout, `${pkg.version}\n`)
    })
  }

  it('into a pipe, loads neither node:net nor node:stream (process.stdout would)', () => {
    const preload = path.join(tempDir('cordon-version-'), 'loaded.cjs')
    writeFileSync(
      preload,
      "process.on('exit', () => require('node:fs').writeSync(2, 'LOADED ' + JSON.stringify(process.moduleLoadList.filter((m) => /^NativeModule (net|stream)$/.test(m))) + '\\n'))",
    )
    const r = spawnSync(process.execPath, ['-r', preload, CLI, '--version'], { encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, `${pkg.version}\n`)
    assert.deepEqual(JSON.parse(/^LOADED (.*)$/m.exec(r.stderr)?.[1] ?? 'null'), [])
  })

  it('into a pipe nobody reads: exit 141, as SIGPIPE would, and no stack trace', async () => {
    const child = spawn(process.execPath, [CLI, '--version'], { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.destroy() // long before the CLI writes
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text
    })
    const status = await new Promise((resolve) => child.on('close', resolve))
    assert.equal(status, 141, stderr)
    assert.equal(stderr, '')
  })
})

describe('cordon start-up', () => {
  // Agents start the CLI once per command: what a plain run does not use is not loaded.
  /** The built-in modules matching `names` that `cordon run -- true` loaded, with stdin as `stdin`. */
  const loadedBy = (names: RegExp, stdin: 'pipe' | 'ignore') => {
    const preload = path.join(tempDir('cordon-startup-'), 'loaded.cjs')
    const filter = `(m) => /^NativeModule (${names.source})$/.test(m)`
    writeFileSync(
      preload,
      `process.on('exit', () => process.stderr.write('LOADED ' + JSON.stringify(process.moduleLoadList.filter(${filter})) + '\\n'))`,
    )
    const r = spawnSync(process.execPath, ['-r', preload, CLI, 'run', '--', 'true'], {
      encoding: 'utf8',
      stdio: [stdin, 'pipe', 'pipe'],
    })
    assert.equal(r.status, 0, r.stderr)
    return JSON.parse(/^LOADED (.*)$/m.exec(r.stderr)?.[1] ?? 'null')
  }

  it('a plain run loads neither node:crypto nor node:http (they serve network allowlists)', () => {
    assert.deepEqual(loadedBy(/crypto|http|https/, 'pipe'), [])
  })

  it('a run with nothing on stdin never makes process.stdin (a stream, fs/promises and readline)', () => {
    // process.stdin is a getter that builds a stream for whatever fd 0 is: ~1.5 ms a start for nothing.
    assert.deepEqual(loadedBy(/internal\/fs\/streams|internal\/fs\/promises|tty/, 'ignore'), [])
  })

  it('a rebuilt bundle of the same length is run, not the code cached for the old one', () => {
    // V8 checks cached code only against the source's length: the cache must be keyed by the content.
    const dir = tempDir('cordon-cache-', { mode: 0o755 })
    const cache = tempDir('cordon-xdg-')
    writeFileSync(path.join(dir, 'bin.cjs'), readFileSync(CLI))
    const bundle = (word: string) => {
      const body = `(function (exports) { exports.cli = async () => { process.stdout.write('${word}') }\n})`
      const hash = createHash('sha256').update(body).digest('hex')
      return `/* cordon-bundle ${hash} */\n${body}`
    }
    const env = { ...process.env, XDG_CACHE_HOME: cache }
    const say = () =>
      spawnSync(process.execPath, [path.join(dir, 'bin.cjs'), 'run'], { encoding: 'utf8', env })
    for (const word of ['first', 'other', 'third']) {
      writeFileSync(path.join(dir, 'cordon.cjs'), bundle(word))
      for (let i = 0; i < 2; i++) assert.equal(say().stdout, word, `run ${i + 1} after building ${word}`)
    }
  })

  it("caches the code a run compiled, on every Node, beside the newest others' caches", () => {
    // Node 22's compile cache is taken before a module's functions are compiled: bin.cjs takes V8's after.
    const cache = tempDir('cordon-xdg-')
    const v8dir = path.join(cache, 'cordon', 'v8')
    mkdirSync(path.join(v8dir, `${process.version}-x64-0000-0`), { recursive: true, mode: 0o700 })
    // Caches of other builds or other Nodes (a global cordon and a project's, Node 20 and 24): the newest
    // stay, or two of them used in turn would each start cold, deleting the other's; the oldest go.
    const others = ['a', 'b', 'c', 'd', 'e'].map((k) => `cordon-v0.0.${k.charCodeAt(0)}-x64-${k}.bin`)
    others.forEach((name, i) => {
      writeFileSync(path.join(v8dir, name), '')
      const at = new Date(Date.now() - (others.length - i) * 60_000)
      utimesSync(path.join(v8dir, name), at, at)
    })
    const env = { ...process.env, XDG_CACHE_HOME: cache }
    const r = spawnSync(process.execPath, [CLI, 'run', '--', 'true'], { encoding: 'utf8', env })
    assert.equal(r.status, 0, r.stderr)
    const files = readdirSync(v8dir).sort()
    const mine = files.filter((f) => f.startsWith(`cordon-${process.version}-`))
    assert.equal(mine.length, 1, files.join(' '))
    assert.match(
      mine[0] as string,
      new RegExp(`^cordon-${process.version}-${process.arch}-[0-9a-f]{64}\\.bin$`),
    )
    assert.deepEqual(
      files.filter((f) => !mine.includes(f)),
      others.slice(-3).sort(),
      'the three newest others are kept beside this one; the rest, and Node 22 directories, go',
    )
    // Taken after the run: it holds the run's functions, not only the bundle's top level.
    assert.ok(statSync(path.join(v8dir, mine[0] as string)).size > 100_000)
  })

  it("the bundle keeps only the zod it uses: none of zod's other locales", () => {
    const bundle = readFileSync(new URL('../../dist/cli/cordon.cjs', import.meta.url), 'latin1')
    assert.doesNotMatch(bundle, /ltige Eingabe/, 'zod imported by name instead of as a namespace?')
  })

  it('the bundle requires a builtin as it is: no copy of its exports per importing module', () => {
    const bundle = readFileSync(new URL('../../dist/cli/cordon.cjs', import.meta.url), 'latin1')
    // esbuild's __toESM(require('node:path'), 1), minified: a getter per export, at every start.
    assert.doesNotMatch(bundle, /\(require\("node:[\w/]+"\),1\)/)
  })
})

describe('cordon doctor', () => {
  it('reports each check with a fix for what is missing', () => {
    const r = cordon(['doctor', '--json'])
    assert.equal(r.status, 0)
    const report = JSON.parse(r.stdout)
    const names = report.checks.map((c: { name: string }) => c.name)
    for (const name of [
      'bubblewrap',
      'user namespaces',
      'namespace tier',
      'uid drop',
      'rlimits',
      'cgroups',
      'seccomp',
      'spawner',
      'socket memory',
      'open files',
    ]) {
      assert.ok(names.includes(name), name)
    }
    for (const c of report.checks) assert.ok(c.ok || c.fix, `${c.name} has a fix`)
  })

  it("probes bubblewrap the way sandboxes run, not with cordon's own PATH", { skip: noNamespace }, () => {
    const r = spawnSync(process.execPath, [CLI, 'doctor', '--json'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: '/nonexistent' },
    })
    const report = JSON.parse(r.stdout)
    assert.equal(report.autoTier, 'namespace', r.stdout)
  })
})
