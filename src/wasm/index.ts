// `cordon/wasm`: run a WebAssembly guest whose imports start commands, every command a cordon sandbox. A
// face of the engine, which it uses only through index.ts. The guest runs in a worker thread (or, with
// isolation 'sandbox', in a cordon sandbox of its own); its imports are the seed's `platform_sandbox`
// (platform-v2's ABI, bincode 1.3), the handle-based `cordon`, and a WASI preview1 subset without a
// filesystem. test/package/exports.test.ts pins this list; docs/wasm.md says what each does.
export type { WasmExport, WasmImport } from './module.js'
export type { ExecRunOptions, WasmOptions } from './options.js'
export type { ExecRecord, WasmResult, WasmStatus } from './result.js'
export type { LoadWasmOptions, WasmModule, WasmSource } from './run.js'
export { loadWasm, runWasm } from './run.js'
