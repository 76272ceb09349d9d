import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { processTierArgv } from '../../src/plan/process-tier.js'

const tools = { unshare: '/usr/bin/unshare', setpriv: '/usr/bin/setpriv', prlimit: '/usr/bin/prlimit' }

describe('processTierArgv', () => {
  it('as root: empty network namespace, then drop to the sandbox uid, no_new_privs, pdeathsig, rlimits', () => {
    const argv = processTierArgv({
      tools,
      drop: { uid: 60007, gid: 60000 },
      isolateNetwork: true,
      rlimits: ['--cpu=1:2'],
      program: ['/usr/bin/id', '-u'],
    })
    assert.deepEqual(argv, [
      '/usr/bin/unshare',
      '--net',
      '--',
      '/usr/bin/setpriv',
      '--reuid=60007',
      '--regid=60000',
      '--clear-groups',
      '--no-new-privs',
      '--pdeathsig',
      'KILL',
      '--',
      '/usr/bin/prlimit',
      '--cpu=1:2',
      '--',
      '/usr/bin/id',
      '-u',
    ])
  })

  it('not root: no namespace and no uid change, the same hardening', () => {
    const argv = processTierArgv({ tools, drop: null, isolateNetwork: false, rlimits: [], program: ['true'] })
    assert.deepEqual(argv, [
      '/usr/bin/setpriv',
      '--no-new-privs',
      '--pdeathsig',
      'KILL',
      '--',
      '/usr/bin/prlimit',
      '--',
      'true',
    ])
  })
})
