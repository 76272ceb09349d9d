// The system call tables cordon builds seccomp filters from, one per architecture, named as the kernel
// names them (uname -m). The tables are generated from the kernel's headers (scripts/gen-syscalls.mjs).
import { AARCH64_SYSCALLS } from './syscalls-aarch64.js'
import { X86_64_SYSCALLS } from './syscalls-x86_64.js'

/** An architecture cordon has a seccomp filter for. */
export type SeccompArch = 'x86_64' | 'aarch64'

export const SYSCALL_TABLES: Readonly<Record<SeccompArch, Readonly<Record<string, number>>>> = {
  x86_64: X86_64_SYSCALLS,
  aarch64: AARCH64_SYSCALLS,
}

export const SECCOMP_ARCHES = Object.keys(SYSCALL_TABLES) as readonly SeccompArch[]

/** The architecture of this Node's system calls, or null when cordon has no filter for it. */
export function seccompArchOf(nodeArch: string = process.arch): SeccompArch | null {
  return nodeArch === 'x64' ? 'x86_64' : nodeArch === 'arm64' ? 'aarch64' : null
}

/** The number of the system call `name` on `arch`, undefined for a name that architecture does not have. */
export function syscallNumber(name: string, arch: SeccompArch): number | undefined {
  const table = SYSCALL_TABLES[arch]
  return Object.hasOwn(table, name) ? table[name] : undefined
}

/** Whether `name` is a system call of any architecture cordon has a filter for: what denySyscalls takes. */
export function isSyscallName(name: string): boolean {
  return SECCOMP_ARCHES.some((arch) => syscallNumber(name, arch) !== undefined)
}
