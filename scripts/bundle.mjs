// Bundles the CLI's commands (dist/cli/program.js and all it imports, zod and commander included) into
// dist/cli/cordon.cjs, which dist/cli/bin.cjs loads: one file to read and compile at each start instead
// of ~200 modules to resolve. Paths built from import.meta.url keep working: the bundle sits at the same
// depth as the modules (dist/<folder>/), so '../../native/…' still points at the package's native/.
// zod is imported as a namespace (`import * as z`) so esbuild keeps only the schemas cordon uses: its
// locales, JSON Schema and codecs stay out (a bundle ~25% smaller, ~8 ms less to start on Node 24).
// The service (`cordon serve`, `cordon keys`: hono, SQLite, pino…) stays out too: the CLI imports it only
// when one of those runs, from dist/service/ as plain modules, so a `cordon run` never reads it. So does the
// client (dist/client/), which only `cordon run --server` imports, the MCP server (dist/mcp/, the MCP
// SDK), which only `cordon mcp` and `cordon serve` import, and the WASM face (dist/wasm/: its worker and
// sandbox runner are files of their own), which only `cordon wasm` imports.
// It also copies the web dashboard's static files (src/service/ui/) into dist/service/ui/.
import { createHash } from 'node:crypto'
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { build } from 'esbuild'

const ownDist = path.resolve('dist') + path.sep

await build({
  entryPoints: ['dist/cli/program.js'],
  outfile: 'dist/cli/cordon.cjs',
  bundle: true,
  minify: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  charset: 'ascii',
  define: { 'import.meta.url': '__cordonModuleUrl' },
  banner: { js: "var __cordonModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  // By the import's own text: esbuild's `external: ['../client/*']` is also matched against resolved paths,
  // made absolute from the working directory, so a checkout in a folder named client (or service) would
  // leave every module out of the bundle.
  plugins: [
    {
      name: 'faces-apart',
      setup(b) {
        b.onResolve({ filter: /^\.\.\/(?:service|client|mcp|wasm)\// }, (args) => ({ path: args.path, external: true }))
      },
    },
    {
      // `import path from 'node:path'` in a module becomes `__toESM(require('node:path'))` in the bundle: a
      // copy of the builtin's exports, one getter each, made at every start for every module that imports
      // it (24 of them, ~600 getters). A builtin's default export is its module.exports: required as it is.
      name: 'builtin-defaults',
      setup(b) {
        b.onLoad({ filter: /\.js$/ }, (args) => {
          if (!args.path.startsWith(ownDist)) return undefined
          const text = readFileSync(args.path, 'utf8')
          const contents = text.replace(
            /^import (\w+) from '(node:[\w/]+)';$/gm,
            (_, name, id) => `const ${name} = require('${id}');`,
          )
          return contents === text ? undefined : { contents, loader: 'js' }
        })
      },
    },
  ],
  logLevel: 'warning',
})

// bin.cjs reads the bundle as latin1, which is exact only for ASCII.
const code = readFileSync('dist/cli/cordon.cjs', 'latin1')
if (/[^\x00-\x7f]/.test(code)) throw new Error('dist/cli/cordon.cjs is not ASCII: bin.cjs reads it as latin1')
// Wrapped here as a CommonJS module's function, as Module.wrap would at each start: concatenating it there
// made a second copy of the ~300 KB source on the young heap, which its collections paid for.
const wrapped = `(function (exports, require, module, __filename, __dirname) { ${code}\n})`
// The content's hash, first: bin.cjs keys its code cache by it (V8 itself checks only the length).
const hash = createHash('sha256').update(wrapped).digest('hex')
writeFileSync('dist/cli/cordon.cjs', `/* cordon-bundle ${hash} */\n${wrapped}`, 'latin1')

// The dashboard's files (HTML, ES modules, CSS) are served as they are: copied, never built.
cpSync('src/service/ui', 'dist/service/ui', { recursive: true })
