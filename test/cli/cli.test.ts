// The built CLI, run as a user would: exit codes, live streaming, --json, flag errors.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))
const cordon = (args: string[], input?: string) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input, timeout: 30_000 })

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
    })
  }

  it('125 for an empty command', () => {
    const r = cordon(['run', '--', ''])
    assert.equal(r.status, 125)
    assert.match(r.stderr, /command/)
  })

  it('--json prints exactly one result object on stdout', () => {
    const r = cordon(['run', '--json', '--max-output', '10', '--', 'sh', '-c', 'echo 0123456789abcdef'])
    assert.equal(r.status, 124)
    const lines = r.stdout.trim().split('\n')
    assert.equal(lines.length, 1)
    const result = JSON.parse(lines[0]!)
    assert.equal(result.status, 'output-limit')
    assert.equal(result.stdout, '0123456789')
    assert.equal(r.stderr, '')
  })

  it('stdin is EOF without --stdin, forwarded with -, read from a file', () => {
    assert.equal(cordon(['run', '--', 'cat'], 'ignored').stdout, '')
    assert.equal(cordon(['run', '--stdin', '-', '--', 'cat'], 'piped').stdout, 'piped')
    const file = path.join(tempDir('cordon-stdin-', { mode: 0o755 }), 'input')
    writeFileSync(file, 'from file')
    assert.equal(cordon(['run', '--stdin', file, '--', 'cat']).stdout, 'from file')
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
    ]) {
      assert.ok(names.includes(name), name)
    }
    for (const c of report.checks) assert.ok(c.ok || c.fix, `${c.name} has a fix`)
  })
})
