// Bundles the CLI's commands (dist/cli/program.js and all it imports, zod and commander included) into
// dist/cli/cordon.cjs, which dist/cli/bin.cjs loads: one file to read and compile at each start instead
// of ~200 modules to resolve. Paths built from import.meta.url keep working: the bundle sits at the same
// depth as the modules (dist/<folder>/), so '../../native/…' still points at the package's native/.
import { readFileSync } from 'node:fs'
import { build } from 'esbuild'

// zod re-exports every locale (`z.locales`, ~260 KB of the bundle's ~600 KB) from a namespace object the
// bundle must keep whole; cordon's messages are its own and in English, and zod registers English by a
// direct import. Left out, the CLI reads and compiles 40% less at each start.
const withoutZodLocales = {
  name: 'without-zod-locales',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer) ? { path: 'zod-locales', namespace: 'empty' } : undefined,
    )
    build.onLoad({ filter: /.*/, namespace: 'empty' }, () => ({ contents: 'export {}', loader: 'js' }))
  },
}

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
  plugins: [withoutZodLocales],
  logLevel: 'warning',
})

// bin.cjs reads the bundle as latin1 on Node 20, which is exact only for ASCII.
if (/[^\x00-\x7f]/.test(readFileSync('dist/cli/cordon.cjs', 'latin1'))) {
  throw new Error('dist/cli/cordon.cjs is not ASCII: bin.cjs reads it as latin1')
}
