import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import { NetworkGate } from '../../src/net/gate.js'
import { addressKind, parseRule, ruleMatches } from '../../src/net/rules.js'
import { parsePolicy } from '../../src/policy/schema.js'

describe('network rules', () => {
  it('parses host, host:port, wildcards and IPv6', () => {
    assert.deepEqual(parseRule('PyPI.org'), { host: 'pypi.org', port: null })
    assert.deepEqual(parseRule('localhost:8080'), { host: 'localhost', port: 8080 })
    assert.deepEqual(parseRule('*.pythonhosted.org'), { host: '*.pythonhosted.org', port: null })
    assert.deepEqual(parseRule('[::1]:80'), { host: '::1', port: 80 })
    for (const bad of ['a b', 'host:0', 'host:70000', '*', 'http://x.com', '']) {
      assert.equal(typeof parseRule(bad), 'string', bad)
    }
  })

  it('*.x.com matches subdomains only; a port in the rule must match', () => {
    const wild = parseRule('*.x.com')
    if (typeof wild === 'string') throw new Error(wild)
    assert.equal(ruleMatches(wild, 'a.x.com', 443), true)
    assert.equal(ruleMatches(wild, 'b.a.x.com', 443), true)
    assert.equal(ruleMatches(wild, 'x.com', 443), false)
    assert.equal(ruleMatches(wild, 'evilx.com', 443), false)
    const ported = parseRule('localhost:8080')
    if (typeof ported === 'string') throw new Error(ported)
    assert.equal(ruleMatches(ported, 'localhost', 8080), true)
    assert.equal(ruleMatches(ported, 'localhost', 8081), false)
  })

  it('classifies loopback, private, link-local, metadata and public addresses', () => {
    for (const ip of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1'])
      assert.equal(addressKind(ip), 'loopback', ip)
    for (const ip of [
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      'fd00:ec2::254',
      'fe80::1',
      'fc00::1',
      '::',
      '::ffff:10.0.0.1',
      '224.0.0.1',
    ]) {
      assert.equal(addressKind(ip), 'private', ip)
    }
    for (const ip of ['8.8.8.8', '172.32.0.1', '2001:db8::1', '151.101.0.223'])
      assert.equal(addressKind(ip), 'public', ip)
  })
})

describe('network gate', () => {
  const gate = (over: object) =>
    new NetworkGate({ allow: [], deny: [], allowLoopback: false, allowPrivate: false, ...over })

  it('a non-empty allow list is required and deny wins', async () => {
    assert.deepEqual(await gate({}).decide('example.com', 443), {
      allowed: false,
      reason: 'not on the allow list',
    })
    const g = gate({ allow: ['*.example.com', '8.8.8.8'], deny: ['bad.example.com'] })
    assert.equal((await g.decide('bad.example.com', 443)).allowed, false)
    assert.deepEqual(await g.decide('8.8.8.8', 53), { allowed: true, address: '8.8.8.8' })
  })

  it('refuses loopback and private addresses even when the name is allowed (rebinding)', async () => {
    const byName = await gate({ allow: ['localhost'] }).decide('localhost', 80)
    assert.equal(byName.allowed, false)
    assert.match(byName.allowed ? '' : byName.reason, /loopback/)
    const metadata = await gate({ allow: ['169.254.169.254'] }).decide('169.254.169.254', 80)
    assert.match(metadata.allowed ? '' : metadata.reason, /private, link-local or metadata/)
    assert.equal(
      (await gate({ allow: ['localhost'], allowLoopback: true }).decide('localhost', 80)).allowed,
      true,
    )
    assert.equal(
      (await gate({ allow: ['10.1.2.3'], allowPrivate: true }).decide('10.1.2.3', 80)).allowed,
      true,
    )
  })

  it('the schema takes the CLI form and names a bad entry', () => {
    const p = parsePolicy({ network: 'allow:pypi.org,*.pythonhosted.org,!bad.pythonhosted.org,+loopback' })
    assert.deepEqual(p.network, {
      allow: ['pypi.org', '*.pythonhosted.org'],
      deny: ['bad.pythonhosted.org'],
      allowLoopback: true,
      allowPrivate: false,
    })
    assert.throws(
      () => parsePolicy({ network: { allow: ['ok.com', 'not a host'] } }),
      (e: unknown) => e instanceof PolicyError && e.field.startsWith('network'),
    )
  })
})
