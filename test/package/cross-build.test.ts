// The native helpers build for arm64 (Graviton, Ampere) as they do here: cross-compiled with Debian's
// aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross; scripts/setup.sh installs them as
// root), with native/build.sh's flags, warnings as errors. The result is an aarch64 ELF, static but for the
// addon. Running them needs an arm64 kernel: under qemu-user, user namespaces and seccomp() are refused.
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { tempDir } from '../helpers.js'

const run = promisify(execFile)
const NATIVE = fileURLToPath(new URL('../../native/', import.meta.url))
const CC = 'aarch64-linux-gnu-gcc'
const skip =
  process.arch === 'arm64'
    ? 'this machine is arm64: npm run build compiles the helpers natively'
    : spawnSync(CC, ['--version']).status === 0
      ? false
      : `${CC} is not installed (apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross)`

const EM_AARCH64 = 183
const PT_INTERP = 3

/** What an ELF file is built for, and whether it asks for a program interpreter (a dynamic loader). */
function elf(file: string): { machine: number; bits: number; littleEndian: boolean; interpreter: boolean } {
  const b = readFileSync(file)
  assert.equal(b.subarray(0, 4).toString('latin1'), '\x7fELF', `${file} is an ELF file`)
  const phoff = Number(b.readBigUInt64LE(32))
  const phentsize = b.readUInt16LE(54)
  const phnum = b.readUInt16LE(56)
  const types = Array.from({ length: phnum }, (_, i) => b.readUInt32LE(phoff + i * phentsize))
  return {
    machine: b.readUInt16LE(18),
    bits: b[4] === 2 ? 64 : 32,
    littleEndian: b[5] === 1,
    interpreter: types.includes(PT_INTERP),
  }
}

describe('native helpers for arm64', { skip }, () => {
  const out = tempDir('cordon-aarch64-')
  // As native/build.sh builds them: static programs, and the function runner's addon as a shared object.
  const WARNINGS = ['-O2', '-s', '-Wall', '-Wextra', '-Werror']
  const builds: [name: string, source: string, flags: string[]][] = [
    ['cordon-launch', 'launch.c', ['-static']],
    ['cordon-spawner', 'spawner.c', ['-static']],
    ['cordon-bridge', 'bridge.c', ['-static']],
    ['cordon-guard.node', 'guard.c', ['-shared', '-fPIC']],
  ]
  for (const [name, source, flags] of builds) {
    it(`${source} cross-compiles without a warning into an aarch64 ${flags[0] === '-static' ? 'static program' : 'shared object'}`, async () => {
      const target = path.join(out, name)
      await run(CC, [...flags, ...WARNINGS, '-o', target, path.join(NATIVE, source)])
      const e = elf(target)
      assert.deepEqual(
        { machine: e.machine, bits: e.bits, littleEndian: e.littleEndian },
        { machine: EM_AARCH64, bits: 64, littleEndian: true },
      )
      if (flags[0] === '-static') assert.equal(e.interpreter, false, 'no dynamic loader')
    })
  }
})
