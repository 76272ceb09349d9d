// A finish the store refuses is held, logged and stored once the store takes it; the real store is made
// to refuse it by a trigger on its own connection.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { errorResult, type RunResult } from '../../src/index.js'
import { Finisher, type ServiceLog } from '../../src/service/finish.js'
import { SqliteSyncStore as SqliteStore } from '../../src/service/sqlite-sync.js'
import type { RunEvent } from '../../src/service/types.js'
import { tempDir, waitFor } from '../helpers.js'

function logged() {
  const lines: { level: string; msg: string; runId: unknown }[] = []
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) =>
    lines.push({ level, msg, runId: obj.runId })
  const log: ServiceLog = { info: at('info'), warn: at('warn'), error: at('error') }
  return { log, lines }
}

function storeWithRun(id: string) {
  const store = new SqliteStore(tempDir('cordon-finish-'))
  store.createRun({
    id,
    keyId: 'k',
    createdAt: new Date().toISOString(),
    metadata: {},
    request: { cmd: ['true'] },
  })
  store.startRun(id, new Date().toISOString())
  const refuse = () =>
    store.db.exec(
      "CREATE TEMP TRIGGER no_finish BEFORE UPDATE OF state ON main.runs WHEN NEW.state = 'finished' BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END",
    )
  const accept = () => store.db.exec('DROP TRIGGER IF EXISTS temp.no_finish')
  return { store, refuse, accept }
}

const result: RunResult = { ...errorResult('x', 'y'), status: 'ok', violation: null }

describe('Finisher', () => {
  it('stores a finish at once, and announces its end', () => {
    const { store } = storeWithRun('run_a')
    const ends: (RunEvent | null)[] = []
    new Finisher(store, logged().log, (_, end) => ends.push(end)).finish('run_a', result)
    assert.equal(store.getRun('run_a')?.state, 'finished')
    assert.equal(ends[0]?.type, 'end')
  })

  it('holds a refused finish, logs it once, and stores it when the store takes it again', async () => {
    const { store, refuse, accept } = storeWithRun('run_b')
    const { log, lines } = logged()
    const ends: string[] = []
    const finisher = new Finisher(store, log, (runId) => ends.push(runId))
    refuse()
    finisher.finish('run_b', result)
    assert.equal(store.getRun('run_b')?.state, 'running')
    await new Promise((r) => setTimeout(r, 1200)) // a retry or two, still refused
    assert.deepEqual(ends, [])
    assert.equal(lines.filter((l) => l.level === 'error').length, 1, 'said once, not at each retry')
    accept()
    assert.ok(await waitFor(() => ends.length === 1, 10_000), 'stored at a later retry')
    assert.equal(store.getRun('run_b')?.state, 'finished')
    assert.ok(lines.some((l) => l.level === 'info' && l.runId === 'run_b'))
    finisher.close()
  })

  it('at close, tries once more and says what is still not stored', () => {
    const { store, refuse } = storeWithRun('run_c')
    const { log, lines } = logged()
    const finisher = new Finisher(store, log, () => {})
    refuse()
    finisher.finish('run_c', result)
    finisher.close()
    assert.ok(lines.some((l) => l.runId === 'run_c' && /next start ends it interrupted/.test(l.msg)))
  })
})
