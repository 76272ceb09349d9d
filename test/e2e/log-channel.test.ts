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

    it('a secret the budget cuts shows no prefix: not as a raw line, nor in a JSON line', async () => {
      // The secret is the sandbox's own variable (API_TOKEN): redacted automatically, by its name.
      const secret = 'SECRETVALUE'
      for (const line of ['xx$API_TOKEN and more', '{"level":"info","msg":"xx$API_TOKEN"}']) {
        const at = line.indexOf('$API_TOKEN')
        for (const budget of [at + 2, at + 6, at + secret.length - 1]) {
          const r = await run(
            ['sh', '-c', `printf '%s\\n' "${line.replaceAll('"', '\\"')}" >&$CORDON_LOG_FD`],
            {
              isolation: tier,
              env: { API_TOKEN: secret },
              limits: { maxLogBytes: budget },
            },
          )
          assert.equal(r.status, 'ok', r.stderr)
          assert.equal(r.logsTruncated, true)
          const shown = JSON.stringify(r.logs)
          assert.ok(!/SE/.test(shown), `budget ${budget}: ${shown}`)
          // A kept entry counts as its JSON line against the same budget: the cut line is dropped whole,
          // or kept with the secret's start hidden.
          assert.ok(r.logs.length === 0 || /xx\[REDACTED\]$/.test(r.logs[0]?.msg ?? ''), shown)
        }
      }
    })
  })
}
