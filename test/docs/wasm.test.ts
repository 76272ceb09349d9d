// docs/wasm.md's worked example, as written: its guest compiled from the page's own WAT block, the page's
// command run by the built CLI, and the library's version of it.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { loadWasm, runWasm } from '../../src/wasm/index.js'
import { noNamespace, tempDir } from '../helpers.js'
import { wat } from '../wasm/guests.js'

const PAGE = readFileSync(new URL('../../docs/wasm.md', import.meta.url), 'utf8')
const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))
const block = (lang: string) => new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``).exec(PAGE)?.[1] ?? ''

describe("docs/wasm.md's worked example", { skip: noNamespace }, () => {
  const dir = tempDir('cordon-wasm-doc-', { mode: 0o755 })
  const module = path.join(dir, 'answer.wasm')
  writeFileSync(module, wat(block('wat'), 'answer.wat'))

  it('the command prints the log line and the value it shows, and exits 0', () => {
    const command = block('sh').trim()
    assert.equal(command, 'cordon wasm answer.wasm --invoke run --max-execs 1 --allow sh --timeout 2s')
    const args = command.split(' ').slice(1)
    const r = spawnSync(process.execPath, [CLI, ...args], { cwd: dir, encoding: 'utf8', timeout: 60_000 })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, '1\n')
    const shown = /\[wasm info\] (\{.*\})\n/.exec(PAGE)?.[1] ?? ''
    const [before, after] = shown.split('…')
    assert.ok(r.stderr.startsWith(`[wasm info] ${before}`), r.stderr)
    assert.ok(r.stderr.trimEnd().endsWith(after!), r.stderr)
  })

  it('the library gives what the page says', async () => {
    const mod = await loadWasm(module, { memoryBytes: '16M' })
    const r = await runWasm(mod, {
      invoke: 'run',
      exec: { maxExecs: 1, options: { allow: ['sh'], limits: { wallTimeMs: '2s' } } },
    })
    assert.deepEqual([r.status, r.value, r.execCount, r.execs[0]?.status], ['ok', 1, 1, 'ok'])
    assert.ok(r.logs[0]?.msg.startsWith('{"status":"ok","exitCode":0,"signal":null,"stdout":"42\\n",'))
  })
})
