// Bundles the CLI's commands (dist/cli/program.js and all it imports, zod and commander included) into
// dist/cli/cordon.cjs, which dist/cli/bin.cjs loads: one file to read and compile at each start instead
// of ~200 modules to resolve. Paths built from import.meta.url keep working: the bundle sits at the same
// depth as the modules (dist/<folder>/), so '../../native/…' still points at the package's native/.
import { build } from 'esbuild'

await build({
  entryPoints: ['dist/cli/program.js'],
  outfile: 'dist/cli/cordon.cjs',
  bundle: true,
  minify: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  define: { 'import.meta.url': '__cordonModuleUrl' },
  banner: { js: "var __cordonModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  logLevel: 'warning',
})
