// The seed's wire format, pinned by what Rust's bincode 1.3.3 made (test/wasm/vectors/bincode-v1.json, made
// offline by vectors/bincode-gen from Debian's librust-bincode-dev): every golden value both ways, and 400
// mutated requests that bincode accepted or refused, which the decoder must judge alike. Then fuzzing:
// no input makes the decoder throw anything but BincodeError, or take more than a pass over it.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import {
  BincodeError,
  decodeRequest,
  decodeResult,
  encodeRequest,
  encodeResult,
  type SandboxExecRequest,
  type SandboxExecResult,
} from '../../src/wasm/bincode.js'

interface Vectors {
  requests: {
    name: string
    hex: string
    value: {
      command: string
      args: string[]
      env: [string, string][]
      stdin: string | null
      working_directory: string | null
    }
  }[]
  results: {
    name: string
    hex: string
    value:
      | { ok: { exit_code: number; stdout: string; stderr: string; duration_ms: string } }
      | { err: { kind: string; value: string | null } }
  }[]
  mutations: { hex: string; decoded: string | null }[]
}

const vectors = JSON.parse(
  readFileSync(new URL('vectors/bincode-v1.json', import.meta.url), 'utf8'),
) as Vectors
const bytes = (hex: string) => new Uint8Array(Buffer.from(hex, 'hex'))
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex')

function request(v: Vectors['requests'][number]['value']): SandboxExecRequest {
  return {
    command: v.command,
    args: v.args,
    env: v.env,
    stdin: v.stdin === null ? null : bytes(v.stdin),
    workingDirectory: v.working_directory,
  }
}

function result(v: Vectors['results'][number]['value']): SandboxExecResult {
  if ('ok' in v) {
    const o = v.ok
    return {
      ok: {
        exitCode: o.exit_code,
        stdout: bytes(o.stdout),
        stderr: bytes(o.stderr),
        durationMs: BigInt(o.duration_ms),
      },
    }
  }
  const { kind, value } = v.err
  if (kind === 'SandboxDisabled') return { err: { kind } }
  if (kind === 'Timeout' || kind === 'OutputTooLarge') return { err: { kind, value: BigInt(value!) } }
  return { err: { kind: kind as 'ExecutionFailed', message: value! } }
}

/** What Rust re-encoded a decoded request as: its env a BTreeMap (sorted by bytes, the last of a key wins). */
function canonical(req: SandboxExecRequest): Uint8Array {
  const env = [...new Map(req.env)].sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  return encodeRequest({ ...req, env })
}

describe('bincode: the golden vectors of bincode 1.3.3', () => {
  it('has the vectors the research measured (echo hi, Ok hi, CommandNotAllowed, Timeout)', () => {
    assert.equal(
      vectors.requests[0]!.hex,
      '04000000000000006563686f0100000000000000020000000000000068690100000000000000' +
        '010000000000000041010000000000000031010200000000000000696e00',
    )
    const byName = new Map(vectors.results.map((r) => [r.name, r.hex]))
    assert.equal(
      byName.get('ok hi'),
      '0000000000000000030000000000000068690a00000000000000000700000000000000',
    )
    assert.equal(byName.get('CommandNotAllowed'), '01000000010000000200000000000000726d')
    assert.equal(byName.get('Timeout'), '01000000020000003075000000000000')
  })

  for (const v of vectors.requests) {
    it(`request both ways: ${v.name}`, () => {
      assert.equal(hex(encodeRequest(request(v.value))), v.hex)
      assert.deepEqual(decodeRequest(bytes(v.hex)), request(v.value))
    })
  }

  for (const v of vectors.results) {
    it(`result both ways: ${v.name}`, () => {
      assert.equal(hex(encodeResult(result(v.value))), v.hex)
      assert.deepEqual(decodeResult(bytes(v.hex)), result(v.value))
    })
  }

  it('judges 400 mutated requests as bincode did: refused, or decoded to the same value', () => {
    let accepted = 0
    for (const m of vectors.mutations) {
      let decoded: SandboxExecRequest | null = null
      try {
        decoded = decodeRequest(bytes(m.hex))
      } catch (error) {
        assert.ok(error instanceof BincodeError, String(error))
      }
      if (m.decoded === null) assert.equal(decoded, null, `bincode refused ${m.hex}`)
      else {
        assert.ok(decoded, `bincode accepted ${m.hex}`)
        assert.equal(hex(canonical(decoded)), m.decoded)
        accepted++
      }
    }
    assert.ok(accepted > 50 && accepted < 350, `both kinds are in the corpus (${accepted} accepted)`)
  })
})

describe('bincode: bounds', () => {
  it('refuses a length past the input before reading or allocating it', () => {
    const huge = new Uint8Array(8).fill(0xff) // command length 2^64-1
    assert.throws(() => decodeRequest(huge), BincodeError)
    const manyArgs = encodeRequest({ command: 'x', args: [], env: [], stdin: null, workingDirectory: null })
    manyArgs.set([0, 0, 0, 0, 0, 0, 0, 0x10], 9) // args count 2^60
    assert.throws(() => decodeRequest(manyArgs), /claims/)
  })

  it('refuses invalid UTF-8 (a lone surrogate, an overlong) and keeps a BOM as Rust does', () => {
    for (const bad of [[0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xff]]) {
      const b = new Uint8Array([bad.length, 0, 0, 0, 0, 0, 0, 0, ...bad, ...new Uint8Array(18)])
      assert.throws(() => decodeRequest(b), /invalid utf-8/)
    }
    const bom = encodeRequest({ command: '\ufeffls', args: [], env: [], stdin: null, workingDirectory: null })
    assert.equal(decodeRequest(bom).command, '\ufeffls')
  })

  it('fuzz: any bytes decode or throw BincodeError, in time linear in their length', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (input) => {
        try {
          decodeRequest(input)
        } catch (error) {
          if (!(error instanceof BincodeError)) throw error
        }
        try {
          decodeResult(input)
        } catch (error) {
          if (!(error instanceof BincodeError)) throw error
        }
      }),
      { numRuns: 20_000 },
    )
  })

  it('fuzz: mutations of valid requests decode or throw BincodeError', () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 12 })
    const req = fc.record({
      command: text,
      args: fc.array(text, { maxLength: 4 }),
      env: fc.array(fc.tuple(text, text), { maxLength: 3 }),
      stdin: fc.option(fc.uint8Array({ maxLength: 16 }), { nil: null }),
      workingDirectory: fc.option(text, { nil: null }),
    })
    fc.assert(
      fc.property(
        req,
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
        (r, edits) => {
          const encoded = encodeRequest(r)
          assert.deepEqual(decodeRequest(encoded), { ...r }, 'round trip')
          for (const [at, byte] of edits) encoded[at % encoded.length] = byte
          try {
            decodeRequest(encoded)
          } catch (error) {
            if (!(error instanceof BincodeError)) throw error
          }
        },
      ),
      { numRuns: 5000 },
    )
  })
})
