import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { IDENTITY_PATHS, identityFiles, SANDBOX_USER } from '../../src/plan/identity.js'

describe('identityFiles (the sandbox’s /etc/passwd and /etc/group)', () => {
  it('root, the sandbox’s user with its uid, gid and HOME, and nobody', () => {
    assert.deepEqual(identityFiles(60604, 60000, '/tmp'), {
      '/etc/passwd':
        'root:x:0:0:root:/root:/bin/sh\n' +
        `${SANDBOX_USER}:x:60604:60000:cordon sandbox:/tmp:/bin/sh\n` +
        'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
      '/etc/group': `root:x:0:\n${SANDBOX_USER}:x:60000:\nnogroup:x:65534:\n`,
    })
    assert.deepEqual(Object.keys(identityFiles(1, 1, '/')), [...IDENTITY_PATHS])
  })

  it('a HOME the format cannot hold becomes /', () => {
    for (const home of ['relative', '/a:b', '/a\nroot::0:0::/:/bin/sh', '']) {
      const passwd = identityFiles(1000, 1000, home)['/etc/passwd']
      assert.equal(passwd.split('\n').length, 4, 'three lines, nothing injected')
      assert.match(passwd, new RegExp(`^${SANDBOX_USER}:x:1000:1000:cordon sandbox:/:/bin/sh$`, 'm'))
    }
  })

  it('each id has one name: nobody and nogroup give way to a sandbox that has their ids', () => {
    const files = identityFiles(65534, 65534, '/tmp')
    assert.doesNotMatch(files['/etc/passwd'], /^nobody:/m)
    assert.doesNotMatch(files['/etc/group'], /^nogroup:/m)
    assert.doesNotMatch(identityFiles(1000, 0, '/tmp')['/etc/group'], /^root:/m)
  })
})
