// The deterministic clock: libfaketime starts the sandbox's wall clock at a given instant.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { probeCapabilities, run } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

const noFaketime = probeCapabilities().faketime
  ? false
  : 'libfaketime is not installed (apt-get install faketime)'

for (const tier of TIERS) {
  describe(`clock (${tier} tier)`, { skip: noFaketime || skipTier(tier) }, () => {
    const clock = { start: '2024-01-01T00:00:00Z' }

    it('dynamically linked programs, Python and Node see the start time, and time moves on', async () => {
      const script = [
        'date -u +%FT%T',
        'python3 -c "import time; print(int(time.time()))"',
        `node -e "const a = Date.now(); setTimeout(() => console.log(new Date(a).toISOString().slice(0, 16), Date.now() - a >= 200), 250)"`,
      ].join('; ')
      const r = await run(['sh', '-c', script], { isolation: tier, clock })
      assert.equal(r.status, 'ok', r.stderr)
      const [date, epoch, node] = r.stdout.trim().split('\n')
      assert.match(date!, /^2024-01-01T00:00:0\d$/)
      assert.ok(Math.abs(Number(epoch) - 1704067200) < 10, `python epoch ${epoch}`)
      assert.equal(node, '2024-01-01T00:00 true')
    })

    it('one clock for the whole sandbox: it runs on across processes, and sleeps work', async () => {
      const script = [
        'date +%s',
        'sleep 1',
        'date +%s',
        'python3 -c "import time; a = time.time(); time.sleep(0.2); print(int(time.time()), time.time() - a >= 0.2)"',
      ].join('; ')
      const r = await run(['sh', '-c', script], { isolation: tier, clock })
      assert.equal(r.status, 'ok', r.stderr)
      const [first, second, python] = r.stdout.trim().split('\n')
      assert.ok(Math.abs(Number(first) - 1704067200) < 10, `first date ${first}`)
      assert.ok(Number(second) >= Number(first) + 1, `the clock stood still: ${first} then ${second}`)
      const [epoch, slept] = python!.split(' ')
      assert.ok(Number(epoch) >= Number(second), `python ${epoch} after ${second}`)
      assert.equal(slept, 'True')
    })

    it('the start is an instant: a sandbox time zone shows it in local time', async () => {
      const r = await run(['date', '+%F %H:%M %Z'], {
        isolation: tier,
        clock: { start: '2024-06-01T10:00:00Z' },
        env: { TZ: 'Europe/Berlin' },
      })
      assert.equal(r.stdout, '2024-06-01 12:00 CEST\n')
    })
  })
}

describe('clock validation', () => {
  it('refuses a start that is not an ISO date-time, naming the field', async () => {
    await assert.rejects(run(['true'], { clock: { start: 'yesterday' } }), /clock\.start/)
  })
})
