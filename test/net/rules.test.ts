import assert from 'node:assert/strict'
import os from 'node:os'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { PolicyError } from '../../src/errors.js'
import { MAX_LOOKUPS, NetworkGate } from '../../src/net/gate.js'
import {
  type AddressKind,
  addressKind,
  embeddedIPv4,
  formatIPv6,
  type Host,
  parseHost,
  parseIPv6,
  parseIp,
  parseUriHost,
  showHost,
} from '../../src/net/host.js'
import { parseRule, ruleMatches } from '../../src/net/rules.js'
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

  it('rules are parsed by the host parser: canonical IPv6, v4-mapped as IPv4, no address-like names', () => {
    assert.deepEqual(parseRule('[0:0:0:0:0:0:0:1]:80'), { host: '::1', port: 80 })
    assert.deepEqual(parseRule('[::FFFF:127.0.0.1]'), { host: '127.0.0.1', port: null })
    assert.deepEqual(parseRule('Example.COM.'), { host: 'example.com', port: null })
    for (const bad of [
      '127.1',
      '0x7f.1',
      '2130706433',
      '*.1.2',
      'a\0b.com',
      '::1',
      '[::1%lo]',
      '[1.2.3.4]',
      'x:+80',
      'x:080080',
    ])
      assert.equal(typeof parseRule(bad), 'string', bad)
  })
})

/** [spelling, canonical text and kind] for every host that is accepted. */
const ACCEPTED: [string, string, Host['kind']][] = [
  ['example.com', 'example.com', 'name'],
  ['EXAMPLE.com.', 'example.com', 'name'],
  ['localhost', 'localhost', 'name'],
  ['_srv._tcp.example.com', '_srv._tcp.example.com', 'name'],
  ['a-b.c-d', 'a-b.c-d', 'name'],
  ['1.2.3.example', '1.2.3.example', 'name'],
  ['0x7f.example', '0x7f.example', 'name'],
  ['x.0x1g', 'x.0x1g', 'name'],
  [`${'a'.repeat(63)}.com`, `${'a'.repeat(63)}.com`, 'name'],
  [`${'a.'.repeat(125)}com`, `${'a.'.repeat(125)}com`, 'name'],
  ['127.0.0.1', '127.0.0.1', 'ipv4'],
  ['0.0.0.0', '0.0.0.0', 'ipv4'],
  ['255.255.255.255', '255.255.255.255', 'ipv4'],
  ['::1', '::1', 'ipv6'],
  ['0:0:0:0:0:0:0:1', '::1', 'ipv6'],
  ['0000:0000:0000:0000:0000:0000:0000:0001', '::1', 'ipv6'],
  ['::', '::', 'ipv6'],
  ['::ffff:7f00:1', '127.0.0.1', 'ipv4'],
  ['::FFFF:127.0.0.1', '127.0.0.1', 'ipv4'],
  ['0:0:0:0:0:ffff:7f00:0001', '127.0.0.1', 'ipv4'],
  ['::127.0.0.1', '::7f00:1', 'ipv6'],
  ['64:ff9b::127.0.0.1', '64:ff9b::7f00:1', 'ipv6'],
  ['2001:DB8:0:0:1:0:0:1', '2001:db8::1:0:0:1', 'ipv6'],
  ['1:0:0:2:0:0:0:3', '1:0:0:2::3', 'ipv6'],
  ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0', 'ipv6'],
  ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8', 'ipv6'],
  ['fe80::1', 'fe80::1', 'ipv6'],
]

/** Spellings that are neither a name nor a canonical IP literal. */
const REFUSED = [
  '',
  '.',
  'localhost\0.example.com',
  'localhost .example.com',
  ' localhost',
  'localhost\t',
  'localhost\n',
  'a.example.com\r\n',
  'localhost%00.example.com',
  'a..example.com',
  '.example.com',
  'example.com..',
  '-a.example.com',
  'a-.example.com',
  'é.example.com',
  'ｅxample.com',
  'exa mple.com',
  'a/b.com',
  'a@b.com',
  'a:80',
  `${'a'.repeat(64)}.com`,
  `${'a.'.repeat(126)}com`,
  '127.1',
  '127.0.1',
  '2130706433',
  '0x7f000001',
  '0x7f.1',
  '0x7f.0.0.1',
  '0177.0.0.1',
  '127.0.0.01',
  '127.000.0.1',
  '256.0.0.1',
  '1.2.3.4.5',
  '127.0.0.1.',
  'a.0x',
  'a.123',
  '::1%lo',
  'fe80::1%eth0',
  'fe80::1%25eth0',
  '[::1]',
  ':::1',
  '1::2::3',
  '1:2:3:4:5:6:7:8:9',
  '1:2:3:4:5:6:7',
  '12345::1',
  '::ffff:127.1',
  '::ffff:0177.0.0.1',
  '::1.2.3.4:5',
  '1.2.3.4::',
  'g::1',
  '::1 ',
]

const bytes = (...b: number[]) => Uint8Array.from(b)
const v6 = (text: string) => {
  const b = parseIPv6(text)
  if (!b) throw new Error(`${text} does not parse`)
  return b
}

describe('host parser', () => {
  it('accepts exactly names and IP literals, in one canonical spelling', () => {
    for (const [given, text, kind] of ACCEPTED) {
      const host = parseHost(given)
      assert.deepEqual(host && [host.text, host.kind], [text, kind], given)
    }
  })

  it('refuses everything else: NUL, whitespace, %, zone ids, address-like names, non-canonical IPv4', () => {
    for (const given of REFUSED) assert.equal(parseHost(given), null, JSON.stringify(given))
  })

  it('a URI host takes IPv6 only in brackets', () => {
    assert.equal(parseUriHost('[::ffff:7f00:1]')?.text, '127.0.0.1')
    assert.equal(parseUriHost('[0:0::1]')?.text, '::1')
    for (const bad of ['[127.0.0.1]', '[example.com]', '[::1', '::1]', '[::1%lo]', '[]'])
      assert.equal(parseUriHost(bad), null, bad)
  })

  it('shows a refused host escaped (control characters visible) and cut', () => {
    assert.equal(showHost('localhost\0.example.com'), 'localhost\\u0000.example.com')
    assert.equal(showHost('a\\b\u202e\n'), 'a\\\\b\\u202e\\u000a')
    assert.equal(showHost('😀'), '\\ud83d\\ude00')
    const long = showHost('\0'.repeat(1000))
    assert.ok(long.length <= 256 && long.endsWith('...'), long)
  })

  it('property: whatever is accepted is canonical, re-parses to itself, and holds nothing but LDH, dots and colons', () => {
    const hostish = fc.string({
      unit: fc.constantFrom(...'abcfx0123456789.:-_%[] \0\nAFé'.split('')),
      maxLength: 40,
    })
    fc.assert(
      fc.property(fc.oneof(hostish, fc.string({ maxLength: 40 }), fc.domain(), fc.ipV4(), fc.ipV6()), (s) => {
        const host = parseHost(s)
        if (!host) return true
        assert.match(host.text, /^[a-z0-9_.:-]+$/)
        assert.deepEqual(parseHost(host.text), host)
        if (host.kind === 'name') assert.doesNotMatch(host.text, /(^|\.)(\d+|0x[0-9a-f]*)$/)
        return true
      }),
      { numRuns: 20_000 },
    )
  })

  it('property: every IPv6 spelling of the same 16 bytes parses to the same address', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 16, maxLength: 16 }),
        fc.boolean(),
        fc.boolean(),
        (b, pad, upper) => {
          const words = Array.from({ length: 8 }, (_, i) => ((b[2 * i]! << 8) | b[2 * i + 1]!).toString(16))
          let full = words.map((w) => (pad ? w.padStart(4, '0') : w)).join(':')
          if (upper) full = full.toUpperCase()
          const canonical = parseIp(formatIPv6(b))
          assert.deepEqual(parseIp(full), canonical)
          const dotted = `${words.slice(0, 6).join(':')}:${Array.from(b.subarray(12)).join('.')}`
          assert.deepEqual(parseIp(dotted), canonical)
          return true
        },
      ),
      { numRuns: 5000 },
    )
  })
})

/** [address, kind]: both sides of every boundary of the special ranges. */
const KINDS: [string, AddressKind][] = [
  ['0.0.0.0', 'loopback'],
  ['0.1.2.3', 'private'],
  ['1.0.0.0', 'public'],
  ['9.255.255.255', 'public'],
  ['10.0.0.0', 'private'],
  ['10.255.255.255', 'private'],
  ['11.0.0.0', 'public'],
  ['100.63.255.255', 'public'],
  ['100.64.0.0', 'private'],
  ['100.127.255.255', 'private'],
  ['100.128.0.0', 'public'],
  // Metadata endpoints: link-local (AWS, GCP, Azure, OpenStack, ECS tasks at 169.254.170.2), Alibaba
  // Cloud's inside CGNAT space, Oracle's inside the IETF block.
  ['169.254.0.0', 'metadata'],
  ['169.254.170.2', 'metadata'],
  ['169.254.255.255', 'metadata'],
  ['100.100.100.199', 'private'],
  ['100.100.100.200', 'metadata'],
  ['100.100.100.201', 'private'],
  ['192.0.0.191', 'private'],
  ['192.0.0.192', 'metadata'],
  ['192.0.0.193', 'private'],
  ['126.255.255.255', 'public'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.255', 'loopback'],
  ['128.0.0.0', 'public'],
  ['169.253.255.255', 'public'],
  ['169.254.169.254', 'metadata'],
  ['169.255.0.0', 'public'],
  ['172.15.255.255', 'public'],
  ['172.16.0.0', 'private'],
  ['172.31.255.255', 'private'],
  ['172.32.0.0', 'public'],
  ['191.255.255.255', 'public'],
  ['192.0.0.0', 'private'],
  ['192.0.0.255', 'private'],
  ['192.0.1.0', 'public'],
  ['192.0.2.1', 'private'],
  ['192.0.3.0', 'public'],
  ['192.88.98.255', 'public'],
  ['192.88.99.1', 'private'],
  ['192.88.100.0', 'public'],
  ['192.167.255.255', 'public'],
  ['192.168.0.0', 'private'],
  ['192.168.255.255', 'private'],
  ['192.169.0.0', 'public'],
  ['198.17.255.255', 'public'],
  ['198.18.0.0', 'private'],
  ['198.19.255.255', 'private'],
  ['198.20.0.0', 'public'],
  ['198.51.99.255', 'public'],
  ['198.51.100.1', 'private'],
  ['198.51.101.0', 'public'],
  ['203.0.112.255', 'public'],
  ['203.0.113.1', 'private'],
  ['203.0.114.0', 'public'],
  ['223.255.255.255', 'public'],
  ['224.0.0.1', 'private'],
  ['239.255.255.255', 'private'],
  ['240.0.0.0', 'private'],
  ['255.255.255.255', 'private'],
  ['8.8.8.8', 'public'],
  ['151.101.0.223', 'public'],
  // Azure's WireServer: a public address that is the platform's metadata, goal state and extension
  // endpoint inside every Azure VM (its agent's firewall lets root reach it, and the proxy runs as root).
  ['168.63.129.15', 'public'],
  ['168.63.129.16', 'metadata'],
  ['168.63.129.17', 'public'],
  ['::', 'loopback'],
  ['::1', 'loopback'],
  ['::2', 'private'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.0.0.1', 'private'],
  ['::ffff:8.8.8.8', 'public'],
  ['::127.0.0.1', 'loopback'],
  ['::10.0.0.1', 'private'],
  ['::8.8.8.8', 'public'],
  ['::1:0:0:1', 'private'],
  // IPv4-translated (SIIT, RFC 2765): ::ffff:0:a.b.c.d, one group further than v4-mapped.
  ['::ffff:0:127.0.0.1', 'loopback'],
  ['::ffff:0:169.254.169.254', 'metadata'],
  ['::ffff:0:8.8.8.8', 'public'],
  ['::fffe:0:127.0.0.1', 'private'], // not translated: the rest of ::/8
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::169.254.169.254', 'metadata'],
  ['64:ff9b::8.8.8.8', 'public'],
  ['64:ff9b:1::8.8.8.8', 'private'],
  ['64:ff9b:2::1', 'private'], // still in ::/8
  ['100::1', 'private'],
  ['100:0:0:1::1', 'public'],
  ['2001::1', 'loopback'], // Teredo with server 0.0.0.0
  ['2001:0:808:808::f7f7:f7f7', 'public'], // server 8.8.8.8, client 8.8.8.8
  ['2001:0:808:808::80ff:fffe', 'loopback'], // client 127.0.0.1
  ['2001:0:a00:1::f7f7:f7f7', 'private'], // server 10.0.0.1
  ['2001:0:a9fe:a9fe::f7f7:f7f7', 'metadata'], // server 169.254.169.254
  ['2001:0:a9fe:a9fe::80ff:fffe', 'loopback'], // and client 127.0.0.1: the worst of the two
  ['2001:1::1', 'private'],
  ['2001:1ff::1', 'private'],
  ['2001:200::1', 'public'],
  ['2001:db8::1', 'private'],
  ['2001:db9::1', 'public'],
  ['2002:7f00:1::', 'loopback'],
  ['2002:a9fe:a9fe::1', 'metadata'],
  ['2002:808:808::1', 'public'],
  ['2606:4700::1111', 'public'],
  ['3fff::1', 'private'],
  ['3fff:1000::1', 'public'],
  ['fbff::1', 'public'],
  ['fc00::1', 'private'],
  ['fd00:ec2::254', 'metadata'],
  ['fd00:ec2::253', 'private'],
  ['fe80::1', 'metadata'],
  ['febf::1', 'metadata'],
  ['fec0::1', 'private'],
  ['feff::1', 'private'],
  ['ff02::1', 'private'],
]

describe('address kinds', () => {
  it('classifies every special range on its bytes, both sides of each boundary', () => {
    for (const [ip, kind] of KINDS) {
      const host = parseIp(ip)
      assert.ok(host, ip)
      assert.equal(addressKind(host.bytes), kind, ip)
    }
  })

  it('an IPv6 address carrying an IPv4 one leads to it (a deny of the IPv4 address holds for it)', () => {
    assert.deepEqual(embeddedIPv4(v6('::127.0.0.1')), ['127.0.0.1'])
    assert.deepEqual(embeddedIPv4(v6('64:ff9b::a00:1')), ['10.0.0.1'])
    assert.deepEqual(embeddedIPv4(v6('::ffff:0:a00:1')), ['10.0.0.1'])
    assert.deepEqual(embeddedIPv4(v6('2002:a00:1::')), ['10.0.0.1'])
    assert.deepEqual(embeddedIPv4(v6('2001:0:808:808::80ff:fffe')), ['8.8.8.8', '127.0.0.1'])
    assert.deepEqual(embeddedIPv4(v6('::1')), [])
    assert.deepEqual(embeddedIPv4(v6('2606:4700::1111')), [])
    assert.deepEqual(embeddedIPv4(bytes(1, 2, 3, 4)), [])
  })

  it('property: an IPv4 address and its mapped, compatible and NAT64 forms are judged alike', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 4, maxLength: 4 }), (b) => {
        const kind = addressKind(b)
        const at = (prefix: number[]) => {
          const out = new Uint8Array(16)
          out.set(prefix)
          out.set(b, 12)
          return out
        }
        assert.equal(addressKind(at([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])), kind)
        assert.equal(addressKind(at([0, 0x64, 0xff, 0x9b])), kind)
        assert.equal(addressKind(at([0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0])), kind)
        const compat = at([])
        // :: and ::1 themselves are the IPv6 unspecified and loopback addresses.
        if (b[0] !== 0 || b[1] !== 0 || b[2] !== 0 || b[3]! > 1) assert.equal(addressKind(compat), kind)
        const sixToFour = new Uint8Array(16)
        sixToFour.set([0x20, 0x02, ...b])
        assert.equal(addressKind(sixToFour), kind)
        return true
      }),
      { numRuns: 5000 },
    )
  })
})

/** A host as the proxies hand it to the gate. */
const h = (text: string): Host => {
  const host = parseHost(text)
  if (!host) throw new Error(`${text} is not a host`)
  return host
}

describe('network gate', () => {
  const gate = (over: object) =>
    new NetworkGate({
      allow: [],
      deny: [],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: false,
      ...over,
    })

  it('a non-empty allow list is required and deny wins', async () => {
    assert.deepEqual(await gate({}).decide(h('example.com'), 443), {
      allowed: false,
      code: 'not-allowed',
      reason: 'not on the allow list',
    })
    const g = gate({ allow: ['*.example.com', '8.8.8.8'], deny: ['bad.example.com'] })
    assert.equal((await g.decide(h('bad.example.com'), 443)).allowed, false)
    assert.deepEqual(await g.decide(h('8.8.8.8'), 53), { allowed: true, address: '8.8.8.8' })
  })

  it('each answer says its code: denied, not-allowed, loopback, metadata, private, unresolvable', async () => {
    const g = new NetworkGate(
      {
        allow: ['*.test', '127.0.0.1', '169.254.169.254', '10.0.0.1', '[::ffff:7f00:1]'],
        deny: ['no.test'],
        allowLoopback: false,
        allowPrivate: false,
        allowMetadata: false,
      },
      async (name) => {
        if (name === 'gone.test') throw Object.assign(new Error('x'), { code: 'ENOTFOUND' })
        return '93.184.216.34'
      },
    )
    const code = async (host: string) => {
      const d = await g.decide(h(host), 80)
      return d.allowed ? 'connected' : d.code
    }
    assert.deepEqual(
      await Promise.all(
        [
          'no.test',
          'example.com',
          '127.0.0.1',
          '::ffff:7f00:1',
          '169.254.169.254',
          '10.0.0.1',
          'gone.test',
          'ok.test',
        ].map(code),
      ),
      ['denied', 'not-allowed', 'loopback', 'loopback', 'metadata', 'private', 'unresolvable', 'connected'],
    )
  })

  it('a name not allowed, or denied, is never resolved: no DNS query carries what the sandbox named', async () => {
    const asked: string[] = []
    const g = new NetworkGate(
      {
        allow: ['*.example.com', 'x.test:443'],
        deny: ['secret.example.com'],
        allowLoopback: false,
        allowPrivate: false,
        allowMetadata: false,
      },
      async (name) => {
        asked.push(name)
        return '93.184.216.34'
      },
    )
    for (const [name, port] of [
      ['c2VjcmV0.attacker.test', 443],
      ['secret.example.com', 443],
      ['SECRET.example.com.', 443],
      ['x.test', 22],
      ['example.com', 443],
    ] as const)
      assert.equal((await g.decide(h(name), port)).allowed, false, name)
    assert.deepEqual(asked, [])
    assert.equal((await g.decide(h('ok.example.com'), 443)).allowed, true)
    assert.deepEqual(asked, ['ok.example.com'])
  })

  it("the host's own interface addresses are loopback: they reach its services as 127.0.0.1 does", async () => {
    const own = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i !== undefined && !i.internal)
      .map((i) => i!.address)
    if (own.length === 0) return
    for (const address of own) {
      const rule = address.includes(':') ? `[${address}]` : address
      const policy = { allow: [rule, 'me.test'], allowPrivate: true }
      const direct = await gate(policy).decide(h(address), 22)
      assert.equal(direct.allowed, false, `${address} with allowPrivate`)
      assert.match(direct.allowed ? '' : direct.reason, /an address of this host/)
      // A name that resolves to it, too.
      const named = new NetworkGate(
        { deny: [], allowLoopback: false, allowMetadata: false, ...policy },
        async () => address,
      )
      assert.equal((await named.decide(h('me.test'), 22)).allowed, false, `me.test -> ${address}`)
      const loopbackOk = await gate({ ...policy, allowLoopback: true }).decide(h(address), 22)
      assert.equal(loopbackOk.allowed, true, `${address} with allowLoopback`)
    }
  })

  it("the host's own IPv4 addresses in their IPv6 forms (NAT64, 6to4, compatible, translated) too", async () => {
    const own = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i !== undefined && !i.internal && i.family === 'IPv4')
      .map((i) => i!.address)
    if (own.length === 0) return
    for (const address of own) {
      const hex = Array.from(parseIp(address)!.bytes, (b) => b.toString(16).padStart(2, '0')).join('')
      const [hi, lo] = [hex.slice(0, 4), hex.slice(4)]
      for (const form of [
        `64:ff9b::${address}`,
        `2002:${hi}:${lo}::1`,
        `::${address}`,
        `::ffff:0:${address}`,
      ]) {
        const policy = { allow: [`[${form}]`], allowPrivate: true }
        const d = await gate(policy).decide(h(form), 22)
        assert.equal(d.allowed, false, `${form} (${address}) with allowPrivate`)
        assert.match(d.allowed ? '' : d.reason, /an address of this host/, form)
      }
    }
  })

  it('refuses loopback and private addresses even when the name is allowed (rebinding)', async () => {
    const byName = await gate({ allow: ['localhost'] }).decide(h('localhost'), 80)
    assert.equal(byName.allowed, false)
    assert.match(byName.allowed ? '' : byName.reason, /loopback/)
    const metadata = await gate({ allow: ['169.254.169.254'] }).decide(h('169.254.169.254'), 80)
    assert.match(metadata.allowed ? '' : metadata.reason, /metadata/)
    assert.equal(
      (await gate({ allow: ['localhost'], allowLoopback: true }).decide(h('localhost'), 80)).allowed,
      true,
    )
    assert.equal(
      (await gate({ allow: ['10.1.2.3'], allowPrivate: true }).decide(h('10.1.2.3'), 80)).allowed,
      true,
    )
  })

  it('cloud metadata is refused even with allowPrivate: it needs allowMetadata of its own', async () => {
    // allowPrivate is for a private mirror or service; the metadata endpoint hands out the host's cloud
    // credentials, and a sandbox given one should not get the other with it.
    const names = new Map([
      ['meta.example.com', '169.254.169.254'],
      ['wire.example.com', '168.63.129.16'],
    ])
    for (const target of [
      '169.254.169.254',
      '[fd00:ec2::254]',
      '100.100.100.200',
      'meta.example.com',
      'wire.example.com',
      '[::ffff:a9fe:a9fe]',
      '[64:ff9b::a9fe:a9fe]',
    ]) {
      const policy = {
        allow: [target],
        deny: [],
        allowLoopback: false,
        allowPrivate: true,
        allowMetadata: false,
      }
      const g = new NetworkGate(policy, async (name) => names.get(name) ?? '93.184.216.34')
      const d = await g.decide(h(target.replace(/^\[|\]$/g, '')), 80)
      assert.equal(d.allowed, false, target)
      assert.match(d.allowed ? '' : d.reason, /is a cloud metadata address \(allowMetadata is off\)/, target)
      const opened = new NetworkGate(
        { ...policy, allowMetadata: true },
        async (name) => names.get(name) ?? '',
      )
      assert.equal((await opened.decide(h(target.replace(/^\[|\]$/g, '')), 80)).allowed, true, target)
    }
    // allowMetadata alone does not open private ranges.
    const only = gate({ allow: ['10.1.2.3'], allowMetadata: true })
    assert.equal((await only.decide(h('10.1.2.3'), 80)).allowed, false)
  })

  it('an address leading to two places needs what each needs: Teredo, loopback and metadata', async () => {
    // Teredo carries two IPv4 addresses (its server's, and its client's inverted); one kind, the worst,
    // stood for both, and loopback outranked the rest: allowLoopback let the other through unjudged. So
    // did an address of this host beside metadata, which only the host's own link-local address may be.
    const teredo = (server: string, client: string) => {
      const hex = (a: string, flip: number) =>
        Array.from(parseIp(a)!.bytes, (b) => (b ^ flip).toString(16).padStart(2, '0')).join('')
      const words = (x: string) => `${x.slice(0, 4)}:${x.slice(4)}`
      return `2001:0:${words(hex(server, 0))}:0:0:${words(hex(client, 0xff))}`
    }
    const own = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i !== undefined && i.family === 'IPv4')
      .map((i) => i!.address)
    const cases: [string, object, RegExp][] = [
      [teredo('127.0.0.1', '169.254.169.254'), { allowLoopback: true }, /cloud metadata/],
      [teredo('127.0.0.1', '169.254.169.254'), { allowLoopback: true, allowPrivate: true }, /cloud metadata/],
      [teredo('127.0.0.1', '10.1.2.3'), { allowLoopback: true }, /private or reserved/],
      [teredo('169.254.169.254', '127.0.0.1'), { allowMetadata: true }, /loopback/],
      ...own.map((a): [string, object, RegExp] => [
        teredo(a, '169.254.169.254'),
        { allowLoopback: true, allowPrivate: true },
        /cloud metadata/,
      ]),
    ]
    for (const [address, flags, why] of cases) {
      const d = await gate({ allow: [`[${address}]`], ...flags }).decide(h(address), 80)
      assert.equal(d.allowed, false, `${address} with ${JSON.stringify(flags)}`)
      assert.match(d.allowed ? '' : d.reason, why, address)
    }
    // Each place allowed, the address is.
    const all = { allowLoopback: true, allowPrivate: true, allowMetadata: true }
    for (const [address] of cases) {
      assert.equal((await gate({ allow: [`[${address}]`], ...all }).decide(h(address), 80)).allowed, true)
    }
  })

  it('a deny of an IPv4 address holds for the IPv6 spellings that lead to it, and for what a name resolves to', async () => {
    const g = new NetworkGate(
      {
        allow: ['[64:ff9b::a00:1]', '[2002:a00:1::]', '*.example.com', '[::ffff:10.0.0.1]'],
        deny: ['10.0.0.1'],
        allowLoopback: true,
        allowPrivate: true,
        allowMetadata: false,
      },
      async (name) => (name === 'in.example.com' ? '10.0.0.1' : '93.184.216.34'),
    )
    for (const host of ['64:ff9b::a00:1', '2002:a00:1::', '::ffff:a00:1'])
      assert.deepEqual(
        await g.decide(h(host), 80),
        { allowed: false, code: 'denied', reason: 'denied by 10.0.0.1' },
        host,
      )
    assert.deepEqual(await g.decide(h('in.example.com'), 80), {
      allowed: false,
      code: 'denied',
      reason: '10.0.0.1 is denied by 10.0.0.1',
    })
    assert.deepEqual(await g.decide(h('out.example.com'), 80), { allowed: true, address: '93.184.216.34' })
  })

  it('what the resolver answers is parsed strictly and judged on its bytes', async () => {
    const answering = (answer: string) =>
      new NetworkGate(
        {
          allow: ['x.example.com'],
          deny: [],
          allowLoopback: false,
          allowPrivate: false,
          allowMetadata: false,
        },
        async () => answer,
      )
    assert.match(
      ((await answering('fe80::1%eth0').decide(h('x.example.com'), 80)) as { reason: string }).reason,
      /not an address/,
    )
    assert.match(
      ((await answering('::ffff:127.0.0.1').decide(h('x.example.com'), 80)) as { reason: string }).reason,
      /^127\.0\.0\.1 is a loopback/,
    )
    assert.match(
      ((await answering('0.0.0.0').decide(h('x.example.com'), 80)) as { reason: string }).reason,
      /loopback/,
    )
  })

  it(`resolves at most ${MAX_LOOKUPS} names of one run at once; the rest wait their turn`, async () => {
    let running = 0
    let most = 0
    const g = new NetworkGate(
      { allow: ['*.example.com'], deny: [], allowLoopback: false, allowPrivate: false, allowMetadata: false },
      async () => {
        running++
        most = Math.max(most, running)
        await new Promise((r) => setTimeout(r, 5))
        running--
        return '93.184.216.34'
      },
    )
    const all = await Promise.all(Array.from({ length: 20 }, (_, i) => g.decide(h(`n${i}.example.com`), 443)))
    assert.equal(most, MAX_LOOKUPS)
    assert.ok(all.every((d) => d.allowed))
  })

  it('the schema takes the CLI form and names a bad entry', () => {
    const p = parsePolicy({ network: 'allow:pypi.org,*.pythonhosted.org,!bad.pythonhosted.org,+loopback' })
    assert.deepEqual(p.network, {
      allow: ['pypi.org', '*.pythonhosted.org'],
      deny: ['bad.pythonhosted.org'],
      allowLoopback: true,
      allowPrivate: false,
      allowMetadata: false,
    })
    assert.throws(
      () => parsePolicy({ network: { allow: ['ok.com', 'not a host'] } }),
      (e: unknown) => e instanceof PolicyError && e.field.startsWith('network'),
    )
  })
})
