// The WASM face's rows of the bench (bench.ts prints them with the rest; `node --import tsx bench/wasm.ts
// [--quick]` alone). What a host call costs (the worker's postMessage + Atomics.wait round trip) against the
// same import called in-thread, and what an exec through a guest costs against run() of the same command
// with the same options: each figure is the difference between a guest making N calls (or execs) and the
// same guest making none (one exec, for execs), over the difference, so the guest's own start and end are
// not billed to its calls.
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import wabtInit from 'wabt'
import { openSpawner, type RunOptions, run } from '../src/index.js'
import { encodeRequest } from '../src/wasm/bincode.js'
import { loadWasm, runWasm, type WasmModule } from '../src/wasm/index.js'

export interface WasmRow {
  metric: string
  cordon: string
  baseline: string
  ratio: number
  target?: { op: '<=' | '>='; value: number; absolute?: { figure: number; unit: string } }
}

const wabt = await wabtInit()
const compile = (text: string) => new Uint8Array(wabt.parseWat('bench.wat', text, {}).toBinary({}).buffer)

/** `calls(n)`: n get_timestamp calls. `execs(n)`: n sandbox_exec calls of the request at 1024. */
function guest(request: Uint8Array): Uint8Array {
  const data = [...request].map((b) => `\\${b.toString(16).padStart(2, '0')}`).join('')
  return compile(`(module
    (import "platform_sandbox" "get_timestamp" (func $ts (result i64)))
    (import "platform_sandbox" "sandbox_exec" (func $exec (param i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 4)
    (data (i32.const 1024) "${data}")
    (func (export "calls") (param $n i32)
      (block $done (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (drop (call $ts))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next))))
    (func (export "execs") (param $n i32)
      (block $done (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (if (i32.le_s (call $exec (i32.const 1024) (i32.const ${request.length}) (i32.const 65536) (i32.const 65536)) (i32.const 0))
          (then unreachable))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))))`)
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/**
 * Median over `rounds` of (time of task(n) - time of task(base)) / (n - base), the two interleaved: what one
 * more call or exec costs, the guest's start and end (its execs' workspace made and removed) left out.
 */
async function perUnit(
  task: (n: number) => Promise<unknown>,
  n: number,
  rounds: number,
  base = 0,
): Promise<number> {
  const figures: number[] = []
  await task(base)
  await task(n)
  for (let r = 0; r < rounds; r++) {
    let t = performance.now()
    await task(n)
    const full = performance.now() - t
    t = performance.now()
    await task(base)
    figures.push((full - (performance.now() - t)) / (n - base))
  }
  return median(figures)
}

async function timeGuest(
  mod: WasmModule,
  invoke: string,
  n: number,
  options: RunOptions = {},
): Promise<void> {
  const r = await runWasm(mod, { invoke, args: [n], exec: { maxExecs: Math.max(n, 1), options } })
  if (r.status !== 'ok') throw new Error(`the bench guest ended ${r.status}: ${r.violation?.message}`)
}

export async function wasmRows(quick: boolean): Promise<WasmRow[]> {
  const scaled = (n: number) => (quick ? Math.max(1, Math.round(n / 5)) : n)
  const rows: WasmRow[] = []
  const mod = await loadWasm(
    guest(encodeRequest({ command: 'true', args: [], env: [], stdin: null, workingDirectory: null })),
  )

  // 1. A host call: the bridge's round trip, against the same import answered in the guest's own thread.
  const CALLS = scaled(20_000)
  const bridged = await perUnit((n) => timeGuest(mod, 'calls', n), CALLS, quick ? 2 : 5)
  const direct = await WebAssembly.instantiate(
    compile(`(module (import "platform_sandbox" "get_timestamp" (func $ts (result i64)))
      (func (export "calls") (param $n i32) (block $done (loop $next (br_if $done (i32.eqz (local.get $n)))
        (drop (call $ts)) (local.set $n (i32.sub (local.get $n) (i32.const 1))) (br $next)))))`),
    { platform_sandbox: { get_timestamp: () => BigInt(Date.now()) } },
  )
  const inThread = direct.instance.exports.calls as (n: number) => void
  const inThreadMs = await perUnit(async (n) => inThread(n), CALLS * 10, 5)
  rows.push({
    metric: 'wasm host call (bridge) vs in-thread import',
    cordon: `${(bridged * 1000).toFixed(1)} µs`,
    baseline: `${(inThreadMs * 1000).toFixed(2)} µs`,
    ratio: bridged / inThreadMs,
    target: { op: '<=', value: 50, absolute: { figure: bridged * 1000, unit: 'µs' } },
  })

  // 2. An exec through the guest against run() of the same command with the same options.
  const EXECS = scaled(40)
  const spawner = await openSpawner()
  try {
    for (const [what, options] of [
      ['namespace', { isolation: 'namespace' }],
      ['process, spawner', { isolation: 'process', spawner }],
    ] as const) {
      const viaGuest: number[] = []
      const viaRun: number[] = []
      for (let r = 0; r < (quick ? 1 : 3); r++) {
        viaGuest.push(await perUnit((n) => timeGuest(mod, 'execs', n, options), EXECS, 1, 1))
        const t = performance.now()
        for (let i = 0; i < EXECS; i++) await run(['true'], options)
        viaRun.push((performance.now() - t) / EXECS)
      }
      const g = median(viaGuest)
      const d = median(viaRun)
      rows.push({
        metric: `wasm exec \`true\` (${what}) vs run()`,
        cordon: `${g.toFixed(2)} ms`,
        baseline: `${d.toFixed(2)} ms`,
        ratio: g / d,
        target: { op: '<=', value: 1.1 },
      })
    }
  } finally {
    await spawner.close()
  }
  return rows
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const row of await wasmRows(process.argv.includes('--quick')))
    console.log(
      `${row.metric.padEnd(48)} ${row.cordon.padStart(10)} ${row.baseline.padStart(10)} ${row.ratio.toFixed(2)}×`,
    )
}
