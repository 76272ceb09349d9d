// Reading a module before it runs: what it imports (with each import's signature, which the JS API does not
// show on Node 20), what it exports, and its memory, whose maximum is then rewritten to the limit. Worker
// resource limits do not bound wasm memory (a worker under a 16 MB heap grew one to 1 GiB): the declared
// maximum is what V8 enforces, so it is clamped in the bytes. Only modules WebAssembly.validate accepts get
// here; every read is still bounded by the bytes, so a module cannot make this loop or throw a RangeError.
import { PolicyError } from '../errors.js'
import { type Signature, showSignature, type ValType } from './abi.js'

export const PAGE = 65536

export type ImportKind = 'function' | 'table' | 'memory' | 'global' | 'tag'
export type ExportKind = ImportKind

export interface ImportInfo {
  module: string
  name: string
  kind: ImportKind
  /** For a function. */
  signature?: Signature
}

export interface ExportInfo {
  name: string
  kind: ExportKind
  /** For a function. */
  signature?: Signature
}

export interface MemoryInfo {
  /** In pages of 64 KiB. */
  min: number
  max: number | null
}

export interface ModuleInfo {
  imports: ImportInfo[]
  exports: ExportInfo[]
  /** The module's own memory, or null when it declares none. */
  memory: MemoryInfo | null
}

const KINDS: ImportKind[] = ['function', 'table', 'memory', 'global', 'tag']
const VALTYPES: Record<number, ValType> = {
  127: 'i32',
  126: 'i64',
  125: 'f32',
  124: 'f64',
  123: 'v128',
  112: 'funcref',
  111: 'externref',
}

const refuse = (reason: string): never => {
  throw new PolicyError('module', reason)
}

class Bytes {
  at: number
  constructor(
    readonly b: Uint8Array,
    at = 0,
    readonly end = b.length,
  ) {
    this.at = at
  }

  u8(): number {
    if (this.at >= this.end) refuse('a section ends too early')
    return this.b[this.at++]!
  }

  /** An unsigned LEB128 of at most `bits` bits (WebAssembly.validate checked the spelling). */
  uleb(bits = 32): number {
    let result = 0
    let shift = 0
    for (let i = 0; i < Math.ceil(bits / 7); i++) {
      const byte = this.u8()
      result += (byte & 0x7f) * 2 ** shift
      if ((byte & 0x80) === 0) return result
      shift += 7
    }
    return refuse('an integer is too long')
  }

  skip(n: number): void {
    if (n > this.end - this.at) refuse('a section ends too early')
    this.at += n
  }

  name(): string {
    const n = this.uleb()
    const start = this.at
    this.skip(n)
    return new TextDecoder().decode(this.b.subarray(start, start + n))
  }

  valtype(): ValType {
    const code = this.u8()
    return VALTYPES[code] ?? refuse(`value type 0x${code.toString(16)} is not supported`)
  }

  limits(): { flags: number; min: number; max: number | null } {
    const flags = this.u8()
    if (flags & 0x04) refuse('a 64-bit memory (memory64) is not supported')
    if (flags & 0x02) refuse('a shared memory is not supported')
    const min = this.uleb()
    const max = flags & 0x01 ? this.uleb() : null
    return { flags, min, max }
  }
}

interface Section {
  id: number
  /** Where its content starts and ends. */
  start: number
  end: number
  /** Where the section starts (its id byte). */
  head: number
}

function sections(bytes: Uint8Array): Section[] {
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d)
    refuse('not a WebAssembly module (no \\0asm header)')
  if (bytes[4] !== 1 || bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0)
    refuse('not a WebAssembly core module of version 1 (a component?)')
  const r = new Bytes(bytes, 8)
  const out: Section[] = []
  while (r.at < bytes.length) {
    const head = r.at
    const id = r.u8()
    const size = r.uleb()
    const start = r.at
    r.skip(size)
    out.push({ id, start, end: r.at, head })
  }
  return out
}

/** What the module imports and exports, and its memory; refuses what cordon cannot run (PolicyError `module`). */
export function inspectModule(bytes: Uint8Array<ArrayBuffer>): ModuleInfo {
  if (!WebAssembly.validate(bytes)) refuse('not a valid WebAssembly module')
  const types: Signature[] = []
  const imports: ImportInfo[] = []
  const funcTypes: Signature[] = []
  const exports: { name: string; kind: ImportKind; index: number }[] = []
  let memory: MemoryInfo | null = null
  for (const s of sections(bytes)) {
    const r = new Bytes(bytes, s.start, s.end)
    if (s.id === 1) {
      for (let i = 0, n = r.uleb(); i < n; i++) {
        const form = r.u8()
        if (form !== 0x60) refuse(`type form 0x${form.toString(16)} (GC types) is not supported`)
        const params = Array.from({ length: r.uleb() }, () => r.valtype())
        const results = Array.from({ length: r.uleb() }, () => r.valtype())
        types.push({ params, results })
      }
    } else if (s.id === 2) {
      for (let i = 0, n = r.uleb(); i < n; i++) {
        const module = r.name()
        const name = r.name()
        const kind = KINDS[r.u8()] ?? refuse(`import ${module}.${name} is of an unknown kind`)
        const entry: ImportInfo = { module, name, kind }
        if (kind === 'function') {
          entry.signature = types[r.uleb()] ?? refuse(`import ${module}.${name} names no type`)
          funcTypes.push(entry.signature)
        } else if (kind === 'memory') {
          refuse(`it imports its memory (${module}.${name}): a module must declare its own`)
        } else if (kind === 'table') {
          r.valtype()
          r.limits()
        } else if (kind === 'global') {
          r.valtype()
          r.u8()
        } else {
          r.u8()
          r.uleb()
        }
        imports.push(entry)
      }
    } else if (s.id === 3) {
      for (let i = 0, n = r.uleb(); i < n; i++)
        funcTypes.push(types[r.uleb()] ?? refuse('a function names no type'))
    } else if (s.id === 5) {
      const n = r.uleb()
      if (n > 1) refuse('more than one memory (multi-memory) is not supported')
      if (n === 1) {
        const { min, max } = r.limits()
        memory = { min, max }
      }
    } else if (s.id === 7) {
      for (let i = 0, n = r.uleb(); i < n; i++) {
        const name = r.name()
        const kind = KINDS[r.u8()] ?? refuse(`export ${name} is of an unknown kind`)
        exports.push({ name, kind, index: r.uleb() })
      }
    }
  }
  return {
    imports,
    memory,
    exports: exports.map(({ name, kind, index }) => {
      const signature = kind === 'function' ? funcTypes[index] : undefined
      return signature ? { name, kind, signature } : { name, kind }
    }),
  }
}

function uleb(n: number): number[] {
  const out: number[] = []
  do {
    let byte = n % 128
    n = Math.floor(n / 128)
    if (n > 0) byte |= 0x80
    out.push(byte)
  } while (n > 0)
  return out
}

/**
 * The module with its memory's maximum set to `maxPages` (or kept, when it declares less). Refuses a module
 * whose memory needs more than that to start. A module without a memory is returned as it is.
 */
export function clampMemory(bytes: Uint8Array<ArrayBuffer>, maxPages: number): Uint8Array<ArrayBuffer> {
  const memorySection = sections(bytes).find((s) => s.id === 5)
  if (!memorySection) return bytes
  const r = new Bytes(bytes, memorySection.start, memorySection.end)
  if (r.uleb() !== 1) return bytes
  const { min, max } = r.limits()
  if (min > maxPages)
    throw new PolicyError(
      'limits.memoryBytes',
      `the module's memory starts at ${min * PAGE} bytes, more than the limit of ${maxPages * PAGE}`,
    )
  const content = [1, 0x01, ...uleb(min), ...uleb(Math.min(max ?? maxPages, maxPages))]
  const section = [5, ...uleb(content.length), ...content]
  const out = new Uint8Array(bytes.length - (memorySection.end - memorySection.head) + section.length)
  out.set(bytes.subarray(0, memorySection.head))
  out.set(section, memorySection.head)
  out.set(bytes.subarray(memorySection.end), memorySection.head + section.length)
  return out
}

/** Import sets by module name: each import's signature, and whether unknown names are stubbed (WASI). */
export interface ImportSetSpec {
  signatures: Readonly<Record<string, Signature>>
  /** Names not in `signatures` resolve to a stub (returning ENOSYS) instead of refusing the module. */
  stubUnknown: boolean
}

const same = (a: Signature, b: Signature) =>
  a.params.length === b.params.length &&
  a.results.length === b.results.length &&
  a.params.every((t, i) => t === b.params[i]) &&
  a.results.every((t, i) => t === b.results[i])

/** Refuses (PolicyError `module`) any import no set provides, or one spelt with another signature. */
export function checkImports(info: ModuleInfo, sets: Readonly<Record<string, ImportSetSpec>>): void {
  for (const imp of info.imports) {
    const where = `${imp.module}.${imp.name}`
    const set = Object.hasOwn(sets, imp.module) ? sets[imp.module] : undefined
    if (!set) refuse(`imports ${where}: cordon provides only ${Object.keys(sets).join(', ')}`)
    if (imp.kind !== 'function' || !imp.signature)
      refuse(`imports ${where} as a ${imp.kind}: only functions are provided`)
    const expected = Object.hasOwn(set!.signatures, imp.name) ? set!.signatures[imp.name] : undefined
    if (!expected) {
      const stubbable =
        imp.signature!.results.length === 0 ||
        (imp.signature!.results.length === 1 && imp.signature!.results[0] === 'i32')
      if (set!.stubUnknown && stubbable) continue
      refuse(`imports ${where}, which cordon does not provide`)
    }
    if (!same(imp.signature!, expected!))
      refuse(`imports ${where} with ${showSignature(imp.signature!)}; expected ${showSignature(expected!)}`)
  }
}

/** An import of a module, as `cordon/wasm` shows it. */
export type WasmImport = ImportInfo
/** An export of a module, as `cordon/wasm` shows it. */
export type WasmExport = ExportInfo
