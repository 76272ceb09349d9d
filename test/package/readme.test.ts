// The README's first command ends with scripts/serve-demo.sh: a real `cordon serve` on a fresh data dir,
// one run over HTTP with the admin key it printed, then a drained exit. It must keep working as written.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { noNamespace } from '../helpers.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

describe("the README's commands", () => {
  it('the first one runs scripts/serve-demo.sh, which serves one run and drains', {
    skip: noNamespace,
  }, () => {
    assert.match(readFileSync(`${ROOT}README.md`, 'utf8'), /&& bash scripts\/serve-demo\.sh\n/)
    const r = spawnSync('bash', ['scripts/serve-demo.sh'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stdout, /"state":"finished"/)
    assert.match(r.stdout, /"stdout":"hello from a served sandbox\\n"/)
    assert.match(r.stdout, /drained and exited 0/)
  })
})
