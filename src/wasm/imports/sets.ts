// The three import sets by module name: what a module may import, each side's functions for the imports
// it does. A module importing from anything else is refused before it is instantiated (module.ts).
import type { GuestEnv, HostContext, HostHandler } from '../abi.js'
import type { ImportInfo, ImportSetSpec } from '../module.js'
import * as cordon from './cordon.js'
import * as platform from './platform-sandbox.js'
import * as wasi from './wasi.js'

export const IMPORT_SETS: Readonly<Record<string, ImportSetSpec>> = {
  [platform.MODULE]: { signatures: platform.SIGNATURES, stubUnknown: false },
  [cordon.MODULE]: { signatures: cordon.SIGNATURES, stubUnknown: false },
  [wasi.MODULE]: { signatures: wasi.SIGNATURES, stubUnknown: true },
}

/** The WASI imports the module has that the subset does not provide: each a stub answering ENOSYS. */
export function wasiStubs(imports: readonly ImportInfo[]): string[] {
  return imports
    .filter((i) => i.module === wasi.MODULE && !Object.hasOwn(wasi.SIGNATURES, i.name))
    .map((i) => i.name)
}

/** The import object for WebAssembly.Instance: only the modules the guest imports from. */
export function guestImports(env: GuestEnv, imports: readonly ImportInfo[]): WebAssembly.Imports {
  const wanted = new Set(imports.map((i) => i.module))
  const out: WebAssembly.Imports = {}
  if (wanted.has(platform.MODULE)) out[platform.MODULE] = platform.guestImports(env)
  if (wanted.has(cordon.MODULE)) out[cordon.MODULE] = cordon.guestImports(env)
  if (wanted.has(wasi.MODULE)) out[wasi.MODULE] = wasi.guestImports(env, wasiStubs(imports))
  return out
}

/** The host handler of each import the module has, by `module.field`: nothing else is answered. */
export function hostHandlers(ctx: HostContext, imports: readonly ImportInfo[]): Map<string, HostHandler> {
  const wanted = new Set(imports.map((i) => i.module))
  const imported = new Set(imports.map((i) => `${i.module}.${i.name}`))
  const out = new Map<string, HostHandler>()
  const add = (handlers: Record<string, HostHandler>) => {
    for (const [name, h] of Object.entries(handlers)) if (imported.has(name)) out.set(name, h)
  }
  if (wanted.has(platform.MODULE)) add(platform.hostHandlers(ctx))
  if (wanted.has(cordon.MODULE)) add(cordon.hostHandlers(ctx))
  if (wanted.has(wasi.MODULE)) add(wasi.hostHandlers(ctx, wasiStubs(imports)))
  return out
}
