// Types for scripts/gen-syscalls.mjs, which test/host/syscalls.test.ts imports.
type Arch = 'x86_64' | 'aarch64'

export function headerDirs(arch: Arch): [string, string] | null
export function headerTable(arch: Arch, dirs?: [string, string] | null): Record<string, number>
export function syscallTable(arch: Arch, dirs?: [string, string] | null): Record<string, number>
export function renderTable(arch: Arch, dirs?: [string, string] | null): string
/** [name, number, first kernel, the architectures that have it (all when absent)] */
export const LATER: readonly (readonly [string, number, string, Arch[]?])[]
export const TABLE_FILES: Record<Arch, string>
