import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type LogEntry, run } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

for (const tier of TIERS) {
  describe(`log channel (${tier} tier)`, { skip: skipTier(tier) }, () => {
    it('JSON lines on CORDON_LOG_FD arrive as onLog events and result.logs; malformed lines as raw info', async () => {
      const seen: LogEntry[] = []
      const script = [
        `echo '{"level":"debug","msg":"starting","step":1}' >&$CORDON_LOG_FD`,
        'echo not json >&$CORDON_LOG_FD',
        `echo '{"level":"shout","msg":"odd"}' >&$CORDON_LOG_FD`,
        `echo '{"level":"error","msg":"done"}' >&$CORDON_LOG_FD`,
        'echo stdout stays separate',
      ].join('; ')
      const r = await run(['sh', '-c', script], { isolation: tier, onLog: (e) => seen.push(e) })
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, 'stdout stays separate\n')
      assert.deepEqual(r.logs, [
        { level: 'debug', msg: 'starting', step: 1 },
        { level: 'info', msg: 'not json' },
        { level: 'info', msg: '{"level":"shout","msg":"odd"}' },
        { level: 'error', msg: 'done' },
      ])
      assert.deepEqual(seen, r.logs)
    })

    it('logs have their own byte budget', async () => {
      const r = await run(
        [
          'sh',
          '-c',
          'for i in $(seq 100); do echo "{\\"level\\":\\"info\\",\\"msg\\":\\"$i\\"}" >&$CORDON_LOG_FD; done',
        ],
        {
          isolation: tier,
          limits: { maxLogBytes: 100 },
        },
      )
      assert.equal(r.status, 'ok')
      assert.equal(r.logsTruncated, true)
      assert.ok(r.logs.length < 10, `${r.logs.length} entries`)
    })
  })
}
