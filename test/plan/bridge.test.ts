import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { bridgeArgv } from '../../src/plan/bridge.js'
import { BRIDGE_INSIDE } from '../../src/plan/bwrap.js'
import { pipedFds, TOKEN_FD } from '../../src/plan/fd-layout.js'
import { spawnerStdio, stdioFor } from '../../src/run/fds.js'

describe('network bridge', () => {
  it('runs from inside the sandbox, with no secret in its argv', () => {
    assert.deepEqual(bridgeArgv(['/usr/bin/curl', '-s', 'http://x/']), [
      BRIDGE_INSIDE,
      '--dir=/tmp/.cordon-net',
      '--http=3128',
      '--socks=1080',
      '--',
      '/usr/bin/curl',
      '-s',
      'http://x/',
    ])
  })

  it('gets its token on fd 9, piped only with an allowlist, which the host writes', () => {
    assert.equal(TOKEN_FD, 9)
    assert.deepEqual(pipedFds('namespace', true, false, true), [3, 4, 5, 6, 9])
    assert.deepEqual(pipedFds('namespace', true, false), [3, 4, 5, 6])
    const plan = {
      fds: pipedFds('namespace', true, true, true),
      pathFds: { passed: [] },
    } as unknown as Parameters<typeof stdioFor>[0]
    const stdio = stdioFor(plan, false)
    assert.equal(stdio.length, 10)
    assert.equal(stdio[9], 'pipe')
    assert.equal(spawnerStdio(stdio)[9], 'write')
    assert.equal(spawnerStdio(stdio)[8], 'read')
  })
})
