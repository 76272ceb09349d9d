import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import * as z from 'zod'
import { allowEntryWithin as entryWithin } from '../../src/index.js'
import { applyCeilings } from '../../src/service/ceilings.js'
import { LIMIT_NAMES, newKeyRecord } from '../../src/service/key-schema.js'
import { runRequestSchema } from '../../src/service/request.js'
import { ServiceError } from '../../src/service/types.js'

const keyWith = (ceilings: unknown, secrets: Record<string, string> = {}) =>
  newKeyRecord({ name: 'k', scopes: ['runs:write'], ceilings, secrets }).record

/** The body parsed and put within the key's ceilings, as the service does. */
const submit = (key: ReturnType<typeof keyWith>, body: unknown) =>
  applyCeilings(key, body, runRequestSchema.parse(body))

const refusal = (fn: () => unknown): ServiceError => {
  try {
    fn()
  } catch (error) {
    assert.ok(error instanceof ServiceError, String(error))
    return error
  }
  assert.fail('was not refused')
}

describe('applyCeilings: limits', () => {
  const key = keyWith({ limits: { wallTimeMs: '10s', memoryBytes: '256M', maxProcesses: 8 } })

  it('refuses a limit asked over the ceiling, naming the field and both values as the options write them', () => {
    const e = refusal(() => submit(key, { cmd: ['true'], options: { limits: { wallTimeMs: '60s' } } }))
    assert.equal(e.code, 'over-ceiling')
    assert.equal(e.field, 'options.limits.wallTimeMs')
    assert.equal(e.message, "options.limits.wallTimeMs: 60s is over this key's ceiling of 10s")
    const m = refusal(() => submit(key, { cmd: ['true'], options: { limits: { memoryBytes: '1G' } } }))
    assert.equal(m.message, "options.limits.memoryBytes: 1G is over this key's ceiling of 256M")
    const p = refusal(() => submit(key, { cmd: ['true'], options: { limits: { maxProcesses: 9 } } }))
    assert.equal(p.field, 'options.limits.maxProcesses')
  })

  it('takes a limit at or under the ceiling as asked', () => {
    const r = submit(key, { cmd: ['true'], options: { limits: { wallTimeMs: 10_000, memoryBytes: '64M' } } })
    assert.equal(r.options.limits?.wallTimeMs, 10_000)
    assert.equal(r.options.limits?.memoryBytes, 64 * 1024 * 1024)
  })

  it('gives a limit left to its default the lesser of the default and the ceiling', () => {
    const r = submit(key, { cmd: ['true'] })
    assert.equal(r.options.limits?.wallTimeMs, 10_000) // default 30s
    assert.equal(r.options.limits?.memoryBytes, 256 * 1024 * 1024) // default 512M
    assert.equal(r.options.limits?.maxProcesses, 8) // default 64
    assert.equal(r.options.limits?.cpuTimeMs, 30_000) // no ceiling: the default
    const loose = keyWith({ limits: { wallTimeMs: '1h' } })
    assert.equal(submit(loose, { cmd: ['true'] }).options.limits?.wallTimeMs, 30_000)
  })

  it('leaves a key without ceilings to the request', () => {
    const r = submit(keyWith({}), { cmd: ['true'], options: { limits: { wallTimeMs: '20m' } } })
    assert.equal(r.options.limits?.wallTimeMs, 1_200_000)
  })
})

describe('applyCeilings: network', () => {
  const allowlist = { allow: ['api.example.com:443'] }
  const body = (network: unknown) => ({ cmd: ['true'], options: { network } })

  it('a "none" ceiling refuses host and any allowlist', () => {
    const key = keyWith({ network: 'none' })
    assert.equal(refusal(() => submit(key, body('host'))).field, 'options.network')
    assert.equal(refusal(() => submit(key, body(allowlist))).field, 'options.network')
    assert.equal(refusal(() => submit(key, body('allow:x.org'))).code, 'over-ceiling')
    assert.equal(submit(key, body('none')).options.network, 'none')
    assert.equal(submit(key, { cmd: ['true'] }).options.network, 'none')
  })

  it('a key without a network ceiling gets none: host and allowlists are granted by name only', () => {
    // A default key asked for `host` and reached every loopback service of the server's machine.
    for (const key of [keyWith({}), keyWith(undefined), keyWith({ limits: { wallTimeMs: '1s' } })]) {
      for (const network of ['host', 'allow:x.org', allowlist, { allow: ['x.org'], allowLoopback: true }]) {
        const e = refusal(() => submit(key, body(network)))
        assert.equal(e.code, 'over-ceiling', JSON.stringify(network))
        assert.equal(e.field, 'options.network')
        assert.match(e.message, /over this key's ceiling of "none"/)
      }
      assert.equal(submit(key, body('none')).options.network, 'none')
      assert.equal(submit(key, { cmd: ['true'] }).options.network, 'none')
    }
    assert.equal(submit(keyWith({ network: 'host' }), body('host')).options.network, 'host')
  })

  it('a list of modes allows those, an allowlist of public hosts only', () => {
    const key = keyWith({ network: ['none', 'allow'] })
    assert.equal(refusal(() => submit(key, body('host'))).field, 'options.network')
    assert.deepEqual(submit(key, body(allowlist)).options.network, {
      ...allowlist,
      deny: [],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: false,
    })
    const e = refusal(() => submit(key, body({ allow: ['x.org'], allowPrivate: true })))
    assert.equal(e.field, 'options.network.allowPrivate')
    const m = refusal(() => submit(key, body('allow:x.org,+metadata')))
    assert.equal(m.field, 'options.network.allowMetadata')
    assert.equal(
      refusal(() => submit(key, body('allow:x.org,+loopback'))).field,
      'options.network.allowLoopback',
    )
    assert.equal(submit(keyWith({ network: ['host'] }), body('host')).options.network, 'host')
  })

  it('an allowlist ceiling: only hosts within it, its deny added, its reach bounding the request’s', () => {
    const key = keyWith({ network: { allow: ['*.example.com', 'pypi.org:443'], deny: ['evil.example.com'] } })
    assert.equal(refusal(() => submit(key, body('host'))).field, 'options.network')
    const ok = submit(
      key,
      body({ allow: ['api.example.com', '*.cdn.example.com:443', 'pypi.org:443'], deny: ['x.y'] }),
    )
    assert.deepEqual(ok.options.network, {
      allow: ['api.example.com', '*.cdn.example.com:443', 'pypi.org:443'],
      deny: ['x.y', 'evil.example.com'],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: false,
    })
    assert.equal(refusal(() => submit(key, body({ allow: ['pypi.org'] }))).field, 'options.network.allow.0')
    assert.equal(
      refusal(() => submit(key, body({ allow: ['a.example.com', 'example.com'] }))).field,
      'options.network.allow.1',
    )
    assert.equal(
      refusal(() => submit(key, body({ allow: ['evil.org'] }))).message.includes('*.example.com'),
      true,
    )
    assert.equal(
      refusal(() => submit(key, body({ allow: [], allowLoopback: true }))).field,
      'options.network.allowLoopback',
    )
    const reach = keyWith({ network: { allow: ['10.0.0.5:8080'], allowPrivate: true } })
    assert.equal(
      (
        submit(reach, body({ allow: ['10.0.0.5:8080'], allowPrivate: true })).options.network as {
          allowPrivate: boolean
        }
      ).allowPrivate,
      true,
    )
  })

  it('entryWithin: hosts, wildcards and ports', () => {
    assert.ok(entryWithin('a.x.com', '*.x.com'))
    assert.ok(entryWithin('*.a.x.com', '*.x.com'))
    assert.ok(entryWithin('*.x.com', '*.x.com'))
    assert.ok(!entryWithin('x.com', '*.x.com'))
    assert.ok(!entryWithin('ax.com', '*.x.com'))
    assert.ok(entryWithin('X.COM.', 'x.com'))
    assert.ok(entryWithin('x.com:443', 'x.com'))
    assert.ok(!entryWithin('x.com', 'x.com:443'))
    assert.ok(!entryWithin('x.com:80', 'x.com:443'))
    assert.ok(entryWithin('[::1]:80', '[::1]'))
    assert.ok(!entryWithin('y.com', 'x.com'))
  })
})

describe('applyCeilings: isolation, rootfs, secrets', () => {
  it('a pinned tier: auto (asked or default) runs it, another is refused', () => {
    const key = keyWith({ isolation: 'namespace' })
    assert.equal(submit(key, { cmd: ['true'] }).options.isolation, 'namespace')
    assert.equal(
      submit(key, { cmd: ['true'], options: { isolation: 'auto' } }).options.isolation,
      'namespace',
    )
    assert.equal(
      submit(key, { cmd: ['true'], options: { isolation: 'namespace' } }).options.isolation,
      'namespace',
    )
    const e = refusal(() => submit(key, { cmd: ['true'], options: { isolation: 'process' } }))
    assert.equal(e.field, 'options.isolation')
    assert.equal(e.code, 'over-ceiling')
  })

  it('rootfs: only the names the key lists', () => {
    const key = keyWith({ rootfs: ['debian', 'alpine'] })
    assert.equal(submit(key, { cmd: ['true'], options: { rootfs: 'alpine' } }).options.rootfs, 'alpine')
    assert.equal(submit(key, { cmd: ['true'] }).options.rootfs, undefined)
    assert.equal(
      refusal(() => submit(key, { cmd: ['true'], options: { rootfs: 'ubuntu' } })).field,
      'options.rootfs',
    )
    assert.equal(
      refusal(() => submit(keyWith({ rootfs: [] }), { cmd: ['true'], options: { rootfs: 'x' } })).field,
      'options.rootfs',
    )
  })

  it('a request cannot set one of the key’s secrets through env', () => {
    const key = keyWith({}, { API_TOKEN: 's3cret' })
    const e = refusal(() =>
      submit(key, { cmd: ['true'], options: { env: { OTHER: '1', API_TOKEN: 'mine' } } }),
    )
    assert.equal(e.code, 'forbidden-option')
    assert.equal(e.field, 'options.env.API_TOKEN')
    assert.deepEqual(submit(key, { cmd: ['true'], options: { env: { OTHER: '1' } } }).options.env, {
      OTHER: '1',
    })
  })

  it('restrictions a request adds (allow, deny, denySyscalls) pass as asked', () => {
    const key = keyWith({ limits: { wallTimeMs: '1s' }, network: 'none', isolation: 'process' })
    const r = submit(key, {
      cmd: ['true'],
      options: { allow: ['python3'], deny: ['curl'], denySyscalls: ['ptrace'] },
    })
    assert.deepEqual(
      [r.options.allow, r.options.deny, r.options.denySyscalls],
      [['python3'], ['curl'], ['ptrace']],
    )
  })
})

// Bodies close to what clients send (mostly valid, each field now and then junk) and now and then
// anything at all: most get through the schema, so the ceilings are what is tested.
const sometimes = <T>(valid: fc.Arbitrary<T>, junk: fc.Arbitrary<unknown> = fc.jsonValue()) =>
  fc.oneof({ weight: 19, arbitrary: valid }, { weight: 1, arbitrary: junk })
const limitValue = sometimes(
  fc.oneof(
    fc.integer({ min: 16, max: 2 ** 31 - 1 }),
    fc.constantFrom('10s', '60s', '1m', '500ms', '256M', '1G', '64K', '2h', '1.5s', '100'),
  ),
  fc.oneof(fc.constantFrom('0', '-1s', 'x', 0, -5), fc.double(), fc.jsonValue()),
)
const limits = fc.dictionary(
  fc.oneof(
    { weight: 30, arbitrary: fc.constantFrom(...LIMIT_NAMES) },
    { weight: 1, arbitrary: fc.constant('other') },
  ),
  limitValue,
  { maxKeys: 4 },
)
const pathLike = fc.oneof(
  fc
    .array(fc.constantFrom('a', 'b', '.', '..', '', 'x.txt', '\\', '%2e%2e', '\0', '...', '*'), {
      minLength: 1,
      maxLength: 6,
    })
    .map((s) => s.join('/')),
  fc.string(),
)
const network = sometimes(
  fc.oneof(
    fc.constantFrom('none', 'host', 'allow:x.org,+private', 'allow:a.example.com:443', 'allow:+loopback'),
    fc.record(
      {
        allow: fc.array(
          fc.constantFrom(
            'a.example.com',
            '*.example.com',
            '*.b.example.com:443',
            'x.org:443',
            '[::1]:80',
            '10.0.0.1',
          ),
          { maxLength: 3 },
        ),
        deny: fc.array(fc.constantFrom('evil.example.com', 'y.org'), { maxLength: 2 }),
        allowLoopback: fc.boolean(),
        allowPrivate: fc.boolean(),
      },
      { requiredKeys: [] },
    ),
  ),
)
const options = fc.record(
  {
    limits: sometimes(limits),
    network,
    isolation: sometimes(fc.constantFrom('auto', 'namespace', 'process'), fc.constant('vm')),
    rootfs: sometimes(fc.constantFrom('debian', 'alpine'), fc.constantFrom('/etc', '')),
    env: sometimes(
      fc.dictionary(fc.constantFrom('API_TOKEN', 'HOME', 'X'), fc.string({ maxLength: 8 }), { maxKeys: 2 }),
    ),
    denySyscalls: sometimes(fc.array(fc.constantFrom('ptrace', 'mount'), { maxLength: 2 })),
    redact: sometimes(fc.array(fc.string({ minLength: 1 }), { maxLength: 2 })),
  },
  { requiredKeys: [] },
)
const body = fc.oneof(
  {
    weight: 9,
    arbitrary: fc.record(
      {
        cmd: sometimes(fc.array(fc.string({ minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 3 })),
        files: fc.array(fc.record({ path: pathLike, content: fc.string({ maxLength: 8 }) }), {
          maxLength: 3,
        }),
        collect: fc.array(pathLike, { maxLength: 2 }),
        options,
        wait: limitValue,
      },
      { requiredKeys: ['cmd'] },
    ),
  },
  { weight: 1, arbitrary: fc.jsonValue() },
)
const ceilings = fc.record(
  {
    limits: fc.record(
      {
        wallTimeMs: fc.constantFrom('1s', '10s', '1h'),
        memoryBytes: fc.constantFrom('64M', '256M', '4G'),
        maxProcesses: fc.integer({ min: 1, max: 100 }),
        maxOutputBytes: fc.constantFrom('1K', '10M'),
      },
      { requiredKeys: [] },
    ),
    network: fc.constantFrom(
      'none',
      'host',
      ['none', 'allow'],
      ['allow', 'host'],
      { allow: ['*.example.com'] },
      { allow: ['x.org:443', '[::1]:80'], allowLoopback: true },
    ),
    isolation: fc.constantFrom('namespace', 'process'),
    rootfs: fc.constantFrom([], ['debian']),
  },
  { requiredKeys: [] },
)

const escapes = (p: string) => {
  const n = path.posix.normalize(p)
  return path.posix.isAbsolute(n) || n.split('/').includes('..')
}

describe('runRequestSchema + applyCeilings, properties', () => {
  it('any body is accepted within the ceilings or refused by a ZodError or a ServiceError', () => {
    const seen = { accepted: 0, overCeiling: 0 }
    fc.assert(
      fc.property(ceilings, body, (c, b) => {
        const key = keyWith(c, { API_TOKEN: 'secret' })
        let accepted: ReturnType<typeof submit>
        try {
          accepted = submit(key, b)
        } catch (error) {
          if (error instanceof ServiceError) seen.overCeiling++
          if (error instanceof z.ZodError || error instanceof ServiceError) return
          throw error
        }
        seen.accepted++
        const within = key.ceilings.limits as Record<string, number> | undefined
        for (const [name, ceiling] of Object.entries(within ?? {})) {
          const value = (accepted.options.limits as Record<string, number>)[name]!
          assert.ok(value <= ceiling, `${name}: ${value} > ${ceiling}`)
        }
        for (const f of accepted.files) assert.ok(!escapes(f.path), f.path)
        for (const p of accepted.collect) assert.ok(!escapes(p), p)
        assert.ok(!Object.hasOwn(accepted.options.env ?? {}, 'API_TOKEN'))
        const net = accepted.options.network
        if (c.network === 'none') assert.equal(net, 'none')
        if (c.network === undefined) assert.equal(net, 'none')
        const hostAllowed = c.network === 'host' || (Array.isArray(c.network) && c.network.includes('host'))
        if (!hostAllowed) assert.notEqual(net, 'host')
        if (c.isolation) assert.equal(accepted.options.isolation, c.isolation)
        if (c.rootfs && accepted.options.rootfs !== undefined)
          assert.ok((c.rootfs as readonly string[]).includes(accepted.options.rootfs))
      }),
      { numRuns: 2000 },
    )
    // Not vacuous: many bodies get through, and many are refused by a ceiling rather than the schema.
    assert.ok(seen.accepted > 100 && seen.overCeiling > 100, JSON.stringify(seen))
  })
})

describe('applyCeilings: the server’s own ceilings', () => {
  // What the server process itself holds for a run (its output and logs, in the result and the events)
  // is bounded for every key: a key made without ceilings asked maxOutputBytes 1G, and 300 MB of output
  // took the server to 2.1 GiB of RSS.
  const server = { maxOutputBytes: 16 * 1024 * 1024, maxLogBytes: 16 * 1024 * 1024 }
  const open = keyWith({})

  it('bounds a key without ceilings, naming the server’s ceiling', () => {
    const body = { cmd: ['true'], options: { limits: { maxOutputBytes: '1G' } } }
    const e = refusal(() => applyCeilings(open, body, runRequestSchema.parse(body), server))
    assert.equal(e.code, 'over-ceiling')
    assert.equal(e.field, 'options.limits.maxOutputBytes')
    assert.equal(e.message, "options.limits.maxOutputBytes: 1G is over this server's ceiling of 16M")
    const fine = { cmd: ['true'], options: { limits: { maxOutputBytes: '16M', maxLogBytes: '1M' } } }
    assert.equal(
      applyCeilings(open, fine, runRequestSchema.parse(fine), server).options.limits?.maxOutputBytes,
      16 * 1024 * 1024,
    )
  })

  it('takes the lower of the key’s and the server’s, naming the one that bounds', () => {
    const low = keyWith({ limits: { maxOutputBytes: '4M' } })
    const body = { cmd: ['true'], options: { limits: { maxOutputBytes: '8M' } } }
    const e = refusal(() => applyCeilings(low, body, runRequestSchema.parse(body), server))
    assert.equal(e.message, "options.limits.maxOutputBytes: 8M is over this key's ceiling of 4M")
    const high = keyWith({ limits: { maxOutputBytes: '1G' } })
    const e2 = refusal(() =>
      applyCeilings(
        high,
        { ...body, options: { limits: { maxOutputBytes: '32M' } } },
        runRequestSchema.parse({ ...body, options: { limits: { maxOutputBytes: '32M' } } }),
        server,
      ),
    )
    assert.match(e2.message, /this server's ceiling of 16M/)
  })
})
