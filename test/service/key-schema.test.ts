import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import * as z from 'zod'
import { keyCeilings, newKeyRecord } from '../../src/service/key-schema.js'
import { hashKey } from '../../src/service/keys.js'

const fieldOf = (fn: () => unknown): string => {
  try {
    fn()
  } catch (error) {
    assert.ok(error instanceof z.ZodError, String(error))
    return error.issues[0]!.path.join('.')
  }
  assert.fail('did not throw')
}

describe('newKeyRecord', () => {
  it('makes a record whose hash is the key’s, with its ceilings in the options’ units', () => {
    const { record, key } = newKeyRecord({
      name: 'ci',
      scopes: ['runs:write', 'runs:read', 'runs:write'],
      ceilings: {
        limits: { wallTimeMs: '10s', memoryBytes: '256M', maxProcesses: 8 },
        network: { allow: ['pypi.org', '*.pythonhosted.org'] },
        isolation: 'namespace',
        rootfs: ['debian'],
      },
      quota: { concurrentRuns: 2 },
      secrets: { API_TOKEN: 's3cret' },
      retention: '30d',
    })
    assert.match(key, /^cordon_[A-Za-z0-9_-]{43}$/)
    assert.equal(record.hash, hashKey(key))
    assert.match(record.id, /^key_[0-9a-f]{32}$/)
    assert.match(record.webhookSecret, /^whsec_[A-Za-z0-9_-]{43}$/)
    assert.deepEqual(record.scopes, ['runs:write', 'runs:read'])
    assert.deepEqual(record.ceilings.limits, {
      wallTimeMs: 10_000,
      memoryBytes: 256 * 1024 * 1024,
      maxProcesses: 8,
    })
    assert.deepEqual(record.quota, { concurrentRuns: 2, runsPerMinute: null })
    assert.deepEqual(record.secrets, { API_TOKEN: 's3cret' })
    assert.equal(record.retentionMs, 30 * 86_400_000)
    assert.equal(record.revokedAt, null)
    assert.ok(!Number.isNaN(Date.parse(record.createdAt)))
    // Stored ceilings parse again to themselves.
    assert.deepEqual(keyCeilings(record), record.ceilings)
  })

  it('gives each key its own id, key and webhook secret', () => {
    const a = newKeyRecord({ name: 'a', scopes: ['admin'] })
    const b = newKeyRecord({ name: 'a', scopes: ['admin'] })
    assert.notEqual(a.key, b.key)
    assert.notEqual(a.record.id, b.record.id)
    assert.notEqual(a.record.webhookSecret, b.record.webhookSecret)
    assert.deepEqual(a.record.ceilings, {})
    assert.equal(a.record.retentionMs, null)
  })

  it('refuses what is invalid, naming the field', () => {
    const base = { name: 'k', scopes: ['runs:read'] }
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, name: '' })),
      'name',
    )
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, scopes: [] })),
      'scopes',
    )
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, scopes: ['root'] })),
      'scopes.0',
    )
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, extra: 1 })),
      '',
    )
    const limit = (limits: unknown) => fieldOf(() => newKeyRecord({ ...base, ceilings: { limits } }))
    assert.equal(limit({ wallTimeMs: '10 parsecs' }), 'ceilings.limits.wallTimeMs')
    assert.equal(limit({ memoryBytes: -1 }), 'ceilings.limits.memoryBytes')
    assert.equal(limit({ maxOpenFiles: 3 }), 'ceilings.limits.maxOpenFiles')
    assert.equal(limit({ wallTime: '1s' }), 'ceilings.limits')
    const ceil = (ceilings: unknown) => fieldOf(() => newKeyRecord({ ...base, ceilings }))
    assert.equal(ceil({ network: 'some' }), 'ceilings.network')
    assert.equal(ceil({ network: [] }), 'ceilings.network')
    assert.equal(ceil({ network: { allow: ['bad host!'] } }), 'ceilings.network.allow.0')
    assert.equal(ceil({ isolation: 'auto' }), 'ceilings.isolation')
    assert.equal(ceil({ rootfs: ['/srv/root'] }), 'ceilings.rootfs.0')
    const secrets = (s: unknown) => fieldOf(() => newKeyRecord({ ...base, secrets: s }))
    assert.equal(secrets({ 'NOT-A-NAME': 'x' }), 'secrets.NOT-A-NAME')
    assert.equal(secrets({ TOKEN: '' }), 'secrets.TOKEN')
    assert.equal(secrets({ TOKEN: 'a\0b' }), 'secrets.TOKEN')
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, retention: '30 days' })),
      'retention',
    )
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, retention: 0 })),
      'retention',
    )
    assert.equal(
      fieldOf(() => newKeyRecord({ ...base, quota: { concurrentRuns: 0 } })),
      'quota.concurrentRuns',
    )
  })

  it('takes network ceilings as a mode, an allowlist or a list of modes', () => {
    for (const network of ['none', 'host', ['none', 'allow'], { allow: ['x.org:443'], allowPrivate: true }]) {
      const { record } = newKeyRecord({ name: 'k', scopes: ['runs:write'], ceilings: { network } })
      assert.ok(record.ceilings.network !== undefined)
    }
  })
})
