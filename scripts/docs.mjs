// Writes docs/options.md from the policy schema, the one truth for options, CLI flags and these docs:
// `npm run docs` (after a build). test/docs/options.test.ts renders it again from src/ and fails on drift.
// Every field must carry a description (zod's .describe(), or its `cli` registry entry): a field without
// one stops the generator, naming it, rather than reaching the docs as a blank.
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const WRAPPERS = new Set(['optional', 'default', 'prefault', 'nullable'])

function unwrap(schema) {
  let s = schema
  while (WRAPPERS.has(s.def.type)) s = s.def.innerType
  return s
}

/** The description of a field: its own (.describe() on any wrapper), else its CLI flag's. */
function describe(schema, meta) {
  for (let s = schema; ; s = s.def.innerType) {
    if (s.description) return s.description
    if (!WRAPPERS.has(s.def.type)) break
  }
  return meta?.description
}

const KIB = 1024
function formatBytes(bytes) {
  for (const [unit, factor] of [
    ['G', KIB ** 3],
    ['M', KIB ** 2],
    ['K', KIB],
  ]) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`
  }
  return `${bytes}B`
}
const formatDuration = (ms) => (ms >= 1000 && ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`)

/** Durations and sizes: a number, or a string with a unit (src/policy/units.ts). */
function unitOf(path, meta) {
  if (meta?.arg === 'DURATION' || path.endsWith('Ms')) return 'duration'
  if (meta?.arg === 'SIZE' || path.endsWith('Bytes')) return 'size'
  return null
}

/**
 * Types zod cannot name (custom checks, preprocessed unions) by path. A new field of such a type fails the
 * generator until it is named here.
 */
const TYPE_NAMES = {
  network: '`"none"` \\| `"host"` \\| allowlist object (below; CLI `allow:HOST,...`)',
  stdin: 'string \\| Buffer \\| Readable',
  signal: 'AbortSignal',
  spawner: '`Spawner` (from `openSpawner()`) or `false`',
  onLog: '(entry: LogEntry) => void',
  onOutput: '(chunk: OutputChunk) => void',
}

/** Defaults the engine applies itself, where the schema leaves a field unset. */
const ENGINE_DEFAULTS = {
  cwd: "cordon's cwd",
  hide: "namespace tier: cordon's `$HOME`",
  stdin: 'EOF',
}

function numberType(s) {
  const parts = []
  let min = null
  let max = null
  for (const check of s.def.checks ?? []) {
    const d = check._zod.def
    if (d.check === 'greater_than') min = `${d.inclusive ? '≥' : '>'} ${d.value}`
    if (d.check === 'less_than') max = `≤ ${d.value}`
    if (d.check === 'number_format' && /int/.test(d.format)) parts.push('integer')
  }
  if (!parts.length) parts.push('number')
  return [parts.join(' '), min, max].filter(Boolean).join(', ')
}

function typeOf(path, schema, meta) {
  const unit = unitOf(path, meta)
  if (unit === 'duration') return 'duration: ms, or `"500ms"`, `"2s"`, `"1m"`, `"1h"`'
  if (unit === 'size') return 'size: bytes, or `"64K"`, `"256M"`, `"1G"`'
  if (TYPE_NAMES[path]) return TYPE_NAMES[path]
  const s = unwrap(schema)
  switch (s.def.type) {
    case 'string':
      if (s.def.format === 'datetime') return 'ISO 8601 date-time with offset (`2024-01-01T00:00:00Z`)'
      return 'string'
    case 'number':
      return numberType(s)
    case 'boolean':
      return 'boolean'
    case 'enum':
      return Object.values(s.def.entries)
        .map((v) => `\`"${v}"\``)
        .join(' \\| ')
    case 'record':
      return 'object: name → string'
    case 'array': {
      const el = unwrap(s.def.element)
      if (el.def.type === 'union') {
        const names = el.def.options.map((o) => (o.def.type === 'custom' ? 'RegExp' : o.def.type))
        return `array of ${names.join(' \\| ')}`
      }
      return `array of ${el.def.type}`
    }
    default:
      throw new Error(`${path}: a ${s.def.type} schema has no type name; add one to TYPE_NAMES in scripts/docs.mjs`)
  }
}

function defaultOf(path, schema, meta) {
  let s = schema
  while (WRAPPERS.has(s.def.type) && s.def.type !== 'default') s = s.def.innerType
  if (s.def.type !== 'default') return ENGINE_DEFAULTS[path] ?? 'unset'
  const value = s.def.defaultValue
  const unit = unitOf(path, meta)
  if (typeof value === 'number') {
    return `\`${unit === 'duration' ? formatDuration(value) : unit === 'size' ? formatBytes(value) : value}\``
  }
  return `\`${JSON.stringify(value)}\``
}

const cell = (text) => String(text).replaceAll('|', '\\|').replaceAll('\n', ' ')

/**
 * The fields of one object, as rows; nested objects (limits, clock, uidPool, cgroup) and the network's
 * allowlist object become groups of their own.
 */
function walk(shape, prefix, cli, groups, missing) {
  const rows = []
  for (const [key, schema] of Object.entries(shape)) {
    const path = prefix + key
    const meta = cli.get(schema)
    const inner = unwrap(schema)
    if (!meta && inner.def.type === 'object') {
      walk(inner.shape, `${path}.`, cli, groups, missing)
      continue
    }
    const description = describe(schema, meta)
    if (!description) missing.push(path)
    const flag = meta ? `\`--${meta.flag}${meta.arg ? ` ${meta.arg}` : ''}\`` : '—'
    rows.push({ path, type: typeOf(path, schema, meta), def: defaultOf(path, schema, meta), flag, description })
    // The allowlist form of a union (network): its object's fields, as a group of their own.
    const piped = inner.def.type === 'pipe' ? inner.def.out : inner
    if (piped.def.type === 'union') {
      for (const option of piped.def.options) {
        if (option.def.type === 'object') walk(option.shape, `${path}.`, cli, groups, missing)
      }
    }
  }
  if (rows.length) groups.unshift({ name: prefix.replace(/\.$/, ''), rows })
}

const INTROS = {
  '': 'The top level of the options object (`run(cmd, options)`, `start()`, `callFunction()`, `createSandbox()`).',
  limits: 'Kernel-enforced limits. Which of them hold on the whole sandbox and which per process: [accounting.md](accounting.md).',
  network: 'The allowlist form of `network` (`{ allow, deny, allowLoopback, allowPrivate }`): see [network.md](network.md).',
  clock: "The sandbox's own wall clock (libfaketime): see [functions.md](functions.md#clock).",
  uidPool: 'The uids handed to sandboxes when cordon runs as root: see [isolation-tiers.md](isolation-tiers.md#as-root).',
  cgroup: 'Where sandbox cgroups are made: see [accounting.md](accounting.md#cgroups).',
}

/** docs/options.md as text. Throws when a field has no description. */
export function renderOptions({ policySchema, cli }) {
  const groups = []
  const missing = []
  walk(policySchema.shape, '', cli, groups, missing)
  if (missing.length) {
    throw new Error(
      `these options have no description (add .describe() or a cli registry entry in the schema): ${missing.join(', ')}`,
    )
  }
  const order = ['', 'limits', 'network', 'clock', 'uidPool', 'cgroup']
  groups.sort((a, b) => (order.indexOf(a.name) >>> 0) - (order.indexOf(b.name) >>> 0))
  const out = [
    '<!-- Generated by scripts/docs.mjs from src/policy/schema.ts: edit the schema, then run `npm run docs`. -->',
    '',
    '# Options',
    '',
    'Every option of `run()`, `start()`, `callFunction()` and `createSandbox()`, and the `cordon run` /',
    '`cordon call` flag that sets it. All are optional. An invalid value throws `PolicyError` naming the',
    "option's path (e.g. `limits.memoryBytes`); on the command line it is exit 125 naming the flag.",
    '',
    'Sizes are binary (`64K` = 65536 bytes; `B`, `K`, `M`, `G`, also `KB`/`KiB`…); durations take `ms`, `s`, `m`,',
    '`h`. In the library a bare number is bytes or milliseconds; on the command line a size or duration needs',
    'its unit. What each option does in depth: [policy.md](policy.md). Flags that set no option (`--json`,',
    '`--stdin`, `--env-from`, `--args`, `--server`): [cli.md](cli.md).',
    '',
  ]
  for (const group of groups) {
    out.push(`## ${group.name === '' ? 'Top level' : `\`${group.name}\``}`, '')
    if (INTROS[group.name] === undefined) throw new Error(`group ${group.name} has no intro in scripts/docs.mjs`)
    out.push(INTROS[group.name], '')
    out.push('| option | type | default | CLI flag | description |', '|---|---|---|---|---|')
    for (const r of group.rows) {
      out.push(`| \`${r.path}\` | ${r.type} | ${cell(r.def)} | ${cell(r.flag)} | ${cell(r.description)} |`)
    }
    out.push('')
  }
  return out.join('\n')
}

export const OPTIONS_MD = fileURLToPath(new URL('../docs/options.md', import.meta.url))

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // From the public API, as any face gets them: the schema and its CLI registry.
  const { policySchema, cliRegistry: cli } = await import('../dist/index.js')
  writeFileSync(OPTIONS_MD, renderOptions({ policySchema, cli }))
  console.log(`wrote ${OPTIONS_MD}`)
}
