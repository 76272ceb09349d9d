import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { classifyAddress } from '../../src/net/host.js'

describe('classifyAddress', () => {
  it('judges every spelling of an address by its bytes', () => {
    for (const [text, kind] of [
      ['127.0.0.1', 'loopback'],
      ['0.0.0.0', 'loopback'],
      ['::1', 'loopback'],
      ['[::1]', 'loopback'],
      ['[0:0:0:0:0:0:0:1]', 'loopback'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['[::ffff:7f00:1]', 'loopback'],
      ['10.1.2.3', 'private'],
      ['169.254.169.254', 'metadata'],
      ['[fd00:ec2::254]', 'metadata'],
      ['[fe80::1]', 'metadata'],
      ['::ffff:192.168.0.1', 'private'],
      ['8.8.8.8', 'public'],
      ['[2606:4700::1111]', 'public'],
    ] as const) {
      assert.equal(classifyAddress(text), kind, text)
    }
  })

  it('is null for a name or a spelling the parser refuses', () => {
    for (const text of ['localhost', 'example.com', '127.1', '0x7f000001', '2130706433', '[::1', '']) {
      assert.equal(classifyAddress(text), null, text)
    }
  })
})
