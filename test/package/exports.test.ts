// The public API, pinned: what `import ... from 'cordon'` gives, values and types. A name that appears or
// disappears here is a change to every user's code (and to the CLI, which uses only this), so it must be
// deliberate: update the lists below and docs/library.md's table in the same commit.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import ts from 'typescript'

const INDEX = new URL('../../src/index.ts', import.meta.url)
const WASM_INDEX = new URL('../../src/wasm/index.ts', import.meta.url)
const DIST = new URL('../../dist/', import.meta.url)

const VALUES = [
  'CordonError',
  'PolicyError',
  'QuotaError',
  'RootfsError',
  'SpawnerError',
  'allowEntryWithin',
  'callFunction',
  'classifyAddress',
  'cliRegistry',
  'createRootfs',
  'createSandbox',
  'defaultSpawner',
  'deleteRootfs',
  'doctor',
  'durationSchema',
  'errorResult',
  'formatBytes',
  'formatDuration',
  'formatLimit',
  'listRootfs',
  'openSpawner',
  'policySchema',
  'probeCapabilities',
  'redactorFor',
  'removeWrittenTree',
  'rootfsCacheDir',
  'run',
  'signalNumber',
  'sizeSchema',
  'start',
]

const TYPES = [
  'AddressKind',
  'ByteRedactor',
  'Capabilities',
  'Check',
  'CliMeta',
  'CreateRootfsOptions',
  'Diagnosis',
  'ErrorInfo',
  'FunctionResult',
  'Isolation',
  'Limits',
  'LogEntry',
  'NetworkCode',
  'NetworkEvent',
  'OutputChunk',
  'OutputData',
  'Policy',
  'RootfsInfo',
  'RunHandle',
  'RunOptions',
  'RunResult',
  'Sandbox',
  'SandboxOptions',
  'SandboxRunOptions',
  'SandboxStats',
  'SecretRedactor',
  'Spawner',
  'Status',
  'Violation',
  'ViolationKind',
]

const HOW =
  'the public API changed: if that is meant, update the list in test/package/exports.test.ts and ' +
  "docs/library.md's exports table in the same commit"

/** `cordon/wasm` (src/wasm/index.ts): its own entry, pinned as the main one is (docs/wasm.md lists it). */
const WASM_VALUES = ['loadWasm', 'runWasm']
const WASM_TYPES = [
  'ExecRecord',
  'ExecRunOptions',
  'LoadWasmOptions',
  'WasmExport',
  'WasmImport',
  'WasmModule',
  'WasmOptions',
  'WasmResult',
  'WasmSource',
  'WasmStatus',
]

/** The names an entry exports as types only (`export type { A, B as C }`, `export { type D }`). */
function typeExports(entry: URL = INDEX): string[] {
  const file = ts.createSourceFile('index.ts', readFileSync(entry, 'utf8'), ts.ScriptTarget.Latest)
  const names: string[] = []
  for (const statement of file.statements) {
    if (!ts.isExportDeclaration(statement)) continue
    const clause = statement.exportClause
    assert.ok(clause && ts.isNamedExports(clause), `${entry.pathname} re-exports whole modules (export *)`)
    for (const spec of clause.elements) {
      if (statement.isTypeOnly || spec.isTypeOnly) names.push(spec.name.text)
    }
  }
  return names.sort()
}

describe('the public API', () => {
  it('exports exactly these values', async () => {
    const actual = Object.keys(await import('../../src/index.js')).sort()
    assert.deepEqual(actual, VALUES, HOW)
  })

  it('exports exactly these types', () => {
    assert.deepEqual(typeExports(), TYPES, HOW)
  })

  it('one name per concept: no value is also exported as a type', () => {
    assert.deepEqual(
      TYPES.filter((t) => VALUES.includes(t)),
      [],
    )
  })

  it('cordon/wasm exports exactly its values and types, from dist/wasm/', async () => {
    const actual = Object.keys(await import('../../src/wasm/index.js')).sort()
    assert.deepEqual(actual, WASM_VALUES, HOW)
    assert.deepEqual(typeExports(WASM_INDEX), WASM_TYPES, HOW)
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    assert.deepEqual(pkg.exports['./wasm'], {
      types: './dist/wasm/index.d.ts',
      import: './dist/wasm/index.js',
    })
  })

  it("the published Spawner type cannot start a process: spawn() is the run path's own", {
    skip: existsSync(new URL('spawner/spawner.d.ts', DIST)) ? false : 'not built (npm run build)',
  }, () => {
    const dts = readFileSync(new URL('spawner/spawner.d.ts', DIST), 'utf8')
    const spawner = dts.slice(dts.indexOf('export declare class Spawner '))
    const body = spawner.slice(0, spawner.indexOf('\n}'))
    assert.ok(body.includes('close(): Promise<void>'), body)
    for (const internal of [/\bspawn\(/, /\bassertOpen\(/, /\bstatic open\(/, /\busable\b/]) {
      assert.doesNotMatch(body, internal, 'marked @internal: stripped from dist by stripInternal')
    }
  })
})
