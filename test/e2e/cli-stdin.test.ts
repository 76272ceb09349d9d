// cordon run passes a piped or redirected stdin through, like any Unix wrapper; a terminal or --stdin none
// gives the program EOF at once.
import assert from 'node:assert/strict'
import { type StdioOptions, spawnSync } from 'node:child_process'
import { openSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { noLauncher, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const cordon = (args: string[], io: { input?: string; stdio?: StdioOptions }) =>
  spawnSync(process.execPath, [CLI, 'run', ...args], { encoding: 'utf8', timeout: 30_000, ...io })

describe('cordon run and its own stdin', { skip: noLauncher }, () => {
  it('a pipe goes through: echo hi | cordon run -- cat', () => {
    const r = cordon(['--', 'cat'], { input: 'hi\n' })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, 'hi\n')
  })

  it('so does a redirected file: cordon run -- wc -c < file', () => {
    const file = path.join(tempDir('cordon-stdin-'), 'in')
    writeFileSync(file, 'x'.repeat(1000))
    const r = cordon(['--', 'wc', '-c'], { stdio: [openSync(file, 'r'), 'pipe', 'pipe'] })
    assert.equal(r.stdout.trim(), '1000', r.stderr)
  })

  it('--stdin none: EOF at once even with a pipe', () => {
    const r = cordon(['--stdin', 'none', '--', 'cat'], { input: 'hi\n' })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, '')
  })

  it('/dev/null (not a pipe or a file): EOF at once', () => {
    const r = cordon(['--', 'cat'], { stdio: ['ignore', 'pipe', 'pipe'] })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, '')
  })
})
