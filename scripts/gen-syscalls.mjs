// Writes src/host/syscalls-x86_64.ts and src/host/syscalls-aarch64.ts, the system call tables the seccomp
// filter is built from, out of the kernel's own headers: `node scripts/gen-syscalls.mjs`.
//
// The numbers are what the C preprocessor makes of <asm/unistd.h> for each architecture, read from
// Debian's kernel headers: linux-libc-dev (/usr/include/x86_64-linux-gnu, or /usr/include/aarch64-linux-gnu
// on an arm64 machine) or the cross packages that come with the cross compilers (linux-libc-dev-arm64-cross:
// /usr/aarch64-linux-gnu/include; linux-libc-dev-amd64-cross: /usr/x86_64-linux-gnu/include). arm64 has no
// table of its own: its asm/unistd.h sets a few __ARCH_WANT_* and includes asm-generic/unistd.h, the
// generic table, so the preprocessor (not a parser of ours) decides which calls it has. Debian 12's headers
// are Linux 6.1; the calls added since are in LATER below, by hand, from the kernel's syscall tables.
// test/host/syscalls.test.ts checks every number against libseccomp's scmp_sys_resolver and fails when the
// tables drift from what this script makes of the headers on the machine.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/** Where each architecture's headers may be: the directory holding asm/unistd.h, then asm-generic's. */
const HEADER_DIRS = {
  x86_64: [
    ['/usr/include/x86_64-linux-gnu', '/usr/include'],
    ['/usr/x86_64-linux-gnu/include', '/usr/x86_64-linux-gnu/include'],
  ],
  aarch64: [
    ['/usr/aarch64-linux-gnu/include', '/usr/aarch64-linux-gnu/include'],
    ['/usr/include/aarch64-linux-gnu', '/usr/include'],
  ],
}

/** The Debian package that ships each set of headers, for the messages. */
const PACKAGES = {
  x86_64: 'linux-libc-dev (amd64) or linux-libc-dev-amd64-cross',
  aarch64: 'linux-libc-dev-arm64-cross (with gcc-aarch64-linux-gnu) or linux-libc-dev (arm64)',
}

/**
 * Calls newer than Linux 6.1's headers. From 424 on, every architecture but alpha numbers new calls alike
 * (arch/x86/entry/syscalls/syscall_64.tbl and scripts/syscall.tbl); 335 and 336 are x86_64's alone.
 */
export const LATER = [
  // [name, number, first kernel, the architectures that have it]
  ['uretprobe', 335, '6.11', ['x86_64']],
  ['uprobe', 336, '6.16', ['x86_64']],
  ['cachestat', 451, '6.5'],
  ['fchmodat2', 452, '6.6'],
  ['map_shadow_stack', 453, '6.6'],
  ['futex_wake', 454, '6.7'],
  ['futex_wait', 455, '6.7'],
  ['futex_requeue', 456, '6.7'],
  ['statmount', 457, '6.8'],
  ['listmount', 458, '6.8'],
  ['lsm_get_self_attr', 459, '6.8'],
  ['lsm_set_self_attr', 460, '6.8'],
  ['lsm_list_modules', 461, '6.8'],
  ['mseal', 462, '6.10'],
  ['setxattrat', 463, '6.13'],
  ['getxattrat', 464, '6.13'],
  ['listxattrat', 465, '6.13'],
  ['removexattrat', 466, '6.13'],
  ['open_tree_attr', 467, '6.15'],
  ['file_getattr', 468, '6.17'],
  ['file_setattr', 469, '6.17'],
]

/** Macros of asm/unistd.h that are not system calls. */
const NOT_CALLS = new Set(['syscalls', 'arch_specific_syscall'])

/** The headers' directories for `arch`, or null when none is installed. */
export function headerDirs(arch) {
  return HEADER_DIRS[arch].find(([dir]) => existsSync(`${dir}/asm/unistd.h`)) ?? null
}

/** The kernel version the headers are from, as "6.1". */
function headerVersion(dirs) {
  const file = dirs.map((d) => `${d}/linux/version.h`).find(existsSync)
  if (!file) throw new Error(`no linux/version.h in ${dirs.join(' or ')}`)
  const text = readFileSync(file, 'utf8')
  const field = (name) => text.match(new RegExp(`#define ${name} (\\d+)`))?.[1]
  return `${field('LINUX_VERSION_MAJOR')}.${field('LINUX_VERSION_PATCHLEVEL')}`
}

/**
 * `arch`'s calls as the headers define them: { name: number }. Every __NR_ macro the preprocessor leaves
 * defined, resolved through the aliases the generic table uses (__NR_fcntl is __NR3264_fcntl, 25).
 */
export function headerTable(arch, dirs = headerDirs(arch)) {
  if (!dirs) throw new Error(`no ${arch} kernel headers: install ${PACKAGES[arch]}`)
  // -undef: no predefined macro of this machine's compiler (__x86_64__, __ILP32__…) picks a header.
  const out = execFileSync(
    process.env.CC ?? 'cc',
    ['-E', '-dM', '-undef', '-nostdinc', ...dirs.flatMap((d) => ['-isystem', d]), '-x', 'c', '-'],
    { input: '#include <asm/unistd.h>\n', encoding: 'utf8' },
  )
  const macros = new Map()
  for (const line of out.split('\n')) {
    const m = line.match(/^#define (\w+) (.+)$/)
    if (m) macros.set(m[1], m[2].trim())
  }
  const value = (name, seen = new Set()) => {
    const v = macros.get(name)
    if (v === undefined || seen.has(name)) throw new Error(`${arch}: cannot resolve ${name}`)
    if (/^\d+$/.test(v)) return Number(v)
    if (/^\w+$/.test(v)) return value(v, seen.add(name))
    throw new Error(`${arch}: ${name} is ${v}, not a number`)
  }
  const table = {}
  for (const name of macros.keys()) {
    const call = name.match(/^__NR_(\w+)$/)?.[1]
    if (call && !NOT_CALLS.has(call)) table[call] = value(name)
  }
  if (Object.keys(table).length < 250) throw new Error(`${arch}: only ${Object.keys(table).length} calls`)
  return table
}

/** `arch`'s full table: the headers' calls and the later ones, sorted by number. */
export function syscallTable(arch, dirs = headerDirs(arch)) {
  const table = headerTable(arch, dirs)
  for (const [name, nr, , arches] of LATER) {
    if (arches && !arches.includes(arch)) continue
    if (table[name] !== undefined && table[name] !== nr) {
      throw new Error(`${arch}: the headers say ${name} is ${table[name]}, LATER says ${nr}`)
    }
    table[name] = nr
  }
  return Object.fromEntries(Object.entries(table).sort(([a, x], [b, y]) => x - y || a.localeCompare(b)))
}

const CONSTANTS = { x86_64: 'X86_64_SYSCALLS', aarch64: 'AARCH64_SYSCALLS' }

export function renderTable(arch, dirs = headerDirs(arch)) {
  const table = syscallTable(arch, dirs)
  const later = LATER.filter(([, , , arches]) => !arches || arches.includes(arch))
  const source = arch === 'aarch64' ? 'the generic table, as arm64 selects it' : 'asm/unistd_64.h'
  const lines = [
    `// ${arch} system call numbers, generated by scripts/gen-syscalls.mjs: do not edit, run it again.`,
    `// From Linux ${headerVersion(dirs)}'s <asm/unistd.h> (${source}), then the ${later.length} calls added since`,
    `// (its LATER list: ${later[0][0]} to ${later.at(-1)[0]}).`,
    '// Data, not logic: src/host/syscalls.ts looks names up here.',
    `export const ${CONSTANTS[arch]}: Readonly<Record<string, number>> = {`,
    ...Object.entries(table).map(([name, nr]) => `  ${name}: ${nr},`),
    '}',
    '',
  ]
  return lines.join('\n')
}

export const TABLE_FILES = {
  x86_64: fileURLToPath(new URL('../src/host/syscalls-x86_64.ts', import.meta.url)),
  aarch64: fileURLToPath(new URL('../src/host/syscalls-aarch64.ts', import.meta.url)),
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arches = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(TABLE_FILES)
  for (const arch of arches) {
    if (!TABLE_FILES[arch]) throw new Error(`unknown architecture ${arch}: x86_64 or aarch64`)
    writeFileSync(TABLE_FILES[arch], renderTable(arch))
    console.log(`wrote ${TABLE_FILES[arch]}`)
  }
}
