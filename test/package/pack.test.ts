// test: slow (packs the package and installs it into a new project, compiling its native addons: ~2 min)
// The package as a user gets it: packed, installed into an empty project from the tarball, and run from
// there (its install script builds the native helpers on the user's machine).
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { noNamespace, tempDir } from '../helpers.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const noCompiler = spawnSync('cc', ['--version']).status === 0 ? false : 'no C compiler to build the helpers'

describe('the packed package', { skip: noCompiler || noNamespace, timeout: 300_000 }, () => {
  it('installs into an empty project and runs a sandbox from the library and the CLI', () => {
    // 0755: the sandbox uid must reach the project (a 0700 parent is another matter, refused by name).
    const dir = tempDir('cordon-pack-', { mode: 0o755 })
    const quiet = { cwd: dir, encoding: 'utf8' as const, stdio: 'pipe' as const }
    execFileSync('npm', ['pack', '--pack-destination', dir, ROOT], quiet)
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))
    assert.ok(tarball, 'npm pack made no tarball')
    execFileSync('npm', ['init', '-y'], quiet)
    execFileSync('npm', ['install', '--no-audit', '--no-fund', path.join(dir, tarball)], quiet)

    const cli = spawnSync(
      path.join(dir, 'node_modules/.bin/cordon'),
      ['run', '--json', '--', 'sh', '-c', 'echo hello'],
      quiet,
    )
    assert.equal(cli.status, 0, cli.stderr)
    assert.equal(JSON.parse(cli.stdout).stdout, 'hello\n')

    const lib = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "import { run } from 'cordon'; const r = await run(['echo', 'from the library']); process.stdout.write(r.status + ' ' + r.stdout)",
      ],
      quiet,
    )
    assert.equal(lib.status, 0, lib.stderr)
    assert.equal(lib.stdout, 'ok from the library\n')
  })

  it('ships what it builds from and the licence', () => {
    const listed = JSON.parse(
      execFileSync('npm', ['pack', '--dry-run', '--json', ROOT], { cwd: ROOT, encoding: 'utf8' }),
    ) as { files: { path: string }[] }[]
    const files = listed[0]!.files.map((f) => f.path)
    for (const c of readdirSync(path.join(ROOT, 'native')).filter((f) => f.endsWith('.c'))) {
      assert.ok(files.includes(`native/${c}`), `native/${c} is not in the package`)
    }
    assert.ok(files.includes('LICENSE'))
    // The dashboard is served from its files as they are: they must be in the package.
    for (const ui of [
      'login.html',
      'login.js',
      'runs.html',
      'run.html',
      'runs.js',
      'run.js',
      'common.js',
      'style.css',
    ]) {
      assert.ok(files.includes(`dist/service/ui/${ui}`), `dist/service/ui/${ui} is not in the package`)
    }
  })
})
