// The layer rule (ARCHITECTURE.md): a folder of src/ imports only from its own folder or a lower rank,
// type imports included, and no two files import each other round a loop. Lower layers never know the
// upper ones, so each can be read, tested and replaced on its own.
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))

/** Rank of each top-level folder (or root file) of src/: higher ranks may import lower ones. */
const RANKS: Record<string, number> = {
  'errors.ts': 0,
  'lazy.ts': 0,
  host: 0,
  net: 1,
  rootfs: 1,
  spawner: 1,
  policy: 2,
  plan: 3,
  run: 4,
  functions: 5,
  doctor: 5,
  sandbox: 6,
  'index.ts': 7,
  service: 8,
  // `cordon/wasm`: WebAssembly guests whose imports run commands; a face beside the service.
  wasm: 8,
  // MCP: tools over the service (`/mcp` on serve, `cordon mcp` on an in-process service of its own).
  mcp: 9,
  // The typed client of the service: above it only to read its types (service/types.ts).
  client: 10,
  cli: 11,
}
/** Base modules every layer may use; the rest of rank 0 (host/) may not import them back but these. */
const BASE = new Set(['errors.ts', 'lazy.ts'])

function sources(): string[] {
  return readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.c?ts$/.test(f))
    .map((f) => f.split(path.sep).join('/'))
}

/** Every relative import or re-export of `file` (value or type), as src-relative paths. */
function importsOf(file: string): string[] {
  return importStatements(file).map((i) => i.to)
}

/** Each relative import or re-export of `file`, and whether it is of types only (`import type …`). */
function importStatements(file: string): { to: string; typeOnly: boolean }[] {
  const text = readFileSync(path.join(SRC, file), 'utf8')
  const out: { to: string; typeOnly: boolean }[] = []
  for (const m of text.matchAll(
    /(?:^|\n)\s*((?:import|export)\b[^'"]*?)from\s*'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g,
  )) {
    const spec = (m[2] ?? m[3]) as string
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec))
    const to = target.replace(/\.c?js$/, (ext) => (ext === '.cjs' ? '.cts' : '.ts'))
    out.push({ to, typeOnly: m[1] !== undefined && /^(?:import|export)\s+type\s/.test(m[1]) })
  }
  return out
}

const unit = (file: string) => file.split('/')[0] as string

describe('layers', () => {
  const files = sources()
  const graph = new Map(files.map((f) => [f, importsOf(f)]))

  it('every folder of src/ has a rank', () => {
    for (const f of files) assert.ok(unit(f) in RANKS, `${unit(f)} (of ${f}) has no rank in this test`)
  })

  it('imports go to the same folder or a lower rank, never up or sideways', () => {
    const wrong: string[] = []
    for (const [from, targets] of graph) {
      for (const to of targets) {
        const a = unit(from)
        const b = unit(to)
        if (a === b || BASE.has(b)) continue
        if ((RANKS[a] as number) <= (RANKS[b] as number)) wrong.push(`${from} -> ${to}`)
      }
    }
    assert.deepEqual(wrong, [])
  })

  it('the faces (CLI, service, MCP, client, WASM) import the engine only through index.ts (and errors.ts)', () => {
    const FACES = new Set(['cli', 'service', 'client', 'mcp', 'wasm'])
    const wrong: string[] = []
    for (const from of files) {
      const face = unit(from)
      if (!FACES.has(face)) continue
      for (const { to, typeOnly } of importStatements(from)) {
        if (unit(to) === face || to === 'index.ts' || to === 'errors.ts') continue
        // The client runs beside no service: it may read the service's types, never load its code.
        if (face === 'client') {
          if (to === 'service/types.ts' && typeOnly) continue
        } else if (FACES.has(unit(to))) continue
        wrong.push(`${from} -> ${to}${typeOnly ? ' (type)' : ''}`)
      }
    }
    assert.deepEqual(wrong, [])
  })

  it('no file imports itself round a loop (type imports count)', () => {
    const state = new Map<string, 'open' | 'done'>()
    const loops: string[] = []
    const visit = (f: string, trail: string[]) => {
      if (state.get(f) === 'done') return
      if (state.get(f) === 'open') return void loops.push([...trail.slice(trail.indexOf(f)), f].join(' -> '))
      state.set(f, 'open')
      for (const to of graph.get(f) ?? []) visit(to, [...trail, f])
      state.set(f, 'done')
    }
    for (const f of files) visit(f, [])
    assert.deepEqual(loops, [])
  })
})

describe('tests mirror src/', () => {
  const TESTS = fileURLToPath(new URL('../', import.meta.url))
  /** Folders of test/ that are not a folder of src/: whole runs, the package, its documents. */
  const APART = new Set(['e2e', 'package', 'docs'])

  it('test/<folder>/[<sub>-]<module>[-<aspect>].test.ts tests src/<folder>/[<sub>/]<module>.ts; whole runs live in test/e2e/', () => {
    const stray: string[] = []
    for (const folder of readdirSync(TESTS, { withFileTypes: true })) {
      if (!folder.isDirectory() || APART.has(folder.name)) continue
      for (const file of readdirSync(path.join(TESTS, folder.name))) {
        const m = /^([a-z0-9-]+)\.test\.ts$/.exec(file)
        if (!m) continue
        // A module name the file's name starts with: `proxy-leftovers` tests proxy.ts; a module in a
        // subfolder is named with a dash, `http-app` for http/app.ts (npm test runs test/*/*.test.ts).
        const parts = (m[1] as string).split('-')
        const found = parts.some((_, i) => {
          const name = parts.slice(0, parts.length - i)
          return (
            existsSync(path.join(SRC, folder.name, `${name.join('-')}.ts`)) ||
            (name.length > 1 &&
              existsSync(path.join(SRC, folder.name, name[0] as string, `${name.slice(1).join('-')}.ts`)))
          )
        })
        if (!found) stray.push(`test/${folder.name}/${file}`)
      }
    }
    assert.deepEqual(stray, [], 'name the module a test is of, or move a whole-run test to test/e2e/')
  })
})
