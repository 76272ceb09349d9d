// The Host allowlist `cordon serve` checks against DNS rebinding: which Host headers pass, and which
// --allowed-host entries are taken.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { allowedHostSchema, hostChecker } from '../../src/service/hosts.js'

describe('hostChecker', () => {
  const strict = hostChecker([])
  it('passes IP literals, localhost and *.localhost, on any port', () => {
    for (const host of [
      '127.0.0.1',
      '127.0.0.1:7070',
      '10.1.2.3:80',
      '[::1]',
      '[::1]:7070',
      '[fe80::1]:1',
      'localhost',
      'localhost:7070',
      'LOCALHOST:1',
      'localhost.:7070',
      'app.localhost:7070',
      'a.b.localhost',
    ])
      assert.equal(strict(host), true, host)
  })
  it('refuses any other name, and what is not a host', () => {
    for (const host of [
      'evil.example',
      'evil.example:7070',
      'localhost.evil.example',
      'evillocalhost',
      '127.0.0.1.evil.example',
      '2130706433',
      '::1',
      '[::1',
      '[evil.example]:1',
      '[::1]x',
      'a:b:c',
      '127.0.0.1:x',
      ' localhost',
    ])
      assert.equal(strict(host), false, host)
  })
  it('passes no Host at all (HTTP/1.0): a browser always sends one', () => {
    assert.equal(strict(undefined), true)
    assert.equal(strict(''), true)
  })
  it('passes a listed name and, for a .name entry, its subdomains; case and a trailing dot aside', () => {
    const check = hostChecker(['cordon.example', '.corp.example'].map((h) => allowedHostSchema.parse(h)))
    for (const host of ['cordon.example', 'Cordon.Example.:443', 'corp.example', 'a.b.corp.example:1'])
      assert.equal(check(host), true, host)
    for (const host of ['x.cordon.example', 'evilcorp.example', 'corp.example.evil', 'evil.example'])
      assert.equal(check(host), false, host)
  })
  it('passes every host with any', () => {
    const check = hostChecker([allowedHostSchema.parse('any')])
    assert.equal(check('evil.example'), true)
  })
})

describe('allowedHostSchema', () => {
  it('takes names, .names and any, lowercased without a trailing dot', () => {
    assert.equal(allowedHostSchema.parse('Cordon.Example.'), 'cordon.example')
    assert.equal(allowedHostSchema.parse('.Corp.Example'), '.corp.example')
    assert.equal(allowedHostSchema.parse('ANY'), 'any')
    assert.equal(allowedHostSchema.parse('intranet'), 'intranet')
  })
  it('refuses a wildcard, a port, a scheme, an empty name', () => {
    for (const bad of [
      '*.corp.example',
      'cordon.example:7070',
      'http://cordon.example',
      '',
      '.',
      'a..b',
      '[::1]',
    ])
      assert.equal(allowedHostSchema.safeParse(bad).success, false, bad)
    assert.match(
      allowedHostSchema.safeParse('*.corp.example').error?.issues[0]?.message ?? '',
      /\.corp\.example/,
    )
  })
})
