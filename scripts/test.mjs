#!/usr/bin/env node
// Runs the test files: those that may share the machine in parallel, those marked `serial` one at a time
// after them. `--quick` leaves out the files marked `slow` (a developer's loop; CI runs everything).
//
//   node scripts/test.mjs [--quick] [--concurrency N] [files...]
//
// A file says what it is in a comment in its first lines, with the reason:
//   // test: slow (builds a Debian root filesystem with debootstrap)
//   // test: serial (measures a load; other files running beside it would be what it measures)
// `slow` files are in the serial group too unless marked `slow, parallel`.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const args = process.argv.slice(2)
const quick = args.includes('--quick')
const at = args.indexOf('--concurrency')
const concurrency = at >= 0 ? Number(args[at + 1]) : Math.max(2, os.availableParallelism())
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`cordon tests: --concurrency must be a positive integer, not ${args[at + 1]}`)
  process.exit(2)
}
const named = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--concurrency')

const allFiles = () =>
  readdirSync(path.join(root, 'test'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) =>
      readdirSync(path.join(root, 'test', d.name))
        .filter((f) => f.endsWith('.test.ts'))
        .map((f) => path.join('test', d.name, f)),
    )
    .sort()

/** The file's marks: `slow`, `serial`, `parallel`, from its `// test: …` line, with the reason. */
function marks(file) {
  const head = readFileSync(path.join(root, file), 'utf8').slice(0, 4096)
  const m = /^\/\/ test: ([a-z, ]+?)\s*\((.+)\)\s*$/m.exec(head)
  if (!m) return { slow: false, serial: false, reason: '' }
  const words = m[1].split(/[ ,]+/).filter(Boolean)
  for (const w of words)
    if (!['slow', 'serial', 'parallel'].includes(w)) throw new Error(`${file}: unknown test mark "${w}"`)
  const slow = words.includes('slow')
  return { slow, serial: words.includes('serial') || (slow && !words.includes('parallel')), reason: m[2] }
}

const files = named.length > 0 ? named : allFiles()
const chosen = []
const left = []
for (const file of files) {
  const m = marks(file)
  if (quick && m.slow && named.length === 0) left.push(`${file} (${m.reason})`)
  else chosen.push({ file, ...m })
}

const run = (group, n) =>
  new Promise((resolve) => {
    if (group.length === 0) return resolve(0)
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--test', `--test-concurrency=${n}`, ...group.map((g) => g.file)],
      { cwd: root, stdio: 'inherit' },
    )
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
  })

const started = Date.now()
const parallel = chosen.filter((c) => !c.serial)
const serial = chosen.filter((c) => c.serial)
const first = await run(parallel, concurrency)
const second = await run(serial, 1)
const s = ((Date.now() - started) / 1000).toFixed(0)
console.error(
  `\ncordon tests: ${parallel.length} files ${concurrency} at a time, then ${serial.length} one at a time, in ${s} s`,
)
if (left.length > 0)
  console.error(`--quick left out ${left.length} slow files (npm test runs them):\n  ${left.join('\n  ')}`)
process.exit(first || second)
