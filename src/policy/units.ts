// Durations and sizes as people write them on a command line; numbers pass through unchanged.

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
}

function parseWithUnits(text: string, units: Record<string, number>, what: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text)
  const factor = match ? units[match[2]!.toLowerCase()] : undefined
  if (!match || factor === undefined) {
    const names = Object.keys(units).filter(Boolean).join(', ')
    throw new Error(`"${text}" is not a ${what} (a non-negative number with a unit: ${names})`)
  }
  const value = Number(match[1]) * factor
  // Tolerate float noise (1.15s) but refuse a fraction of the base unit (0.5 bytes).
  if (Math.abs(value - Math.round(value)) > 1e-6)
    throw new Error(`"${text}" is not a whole number of ${what === 'size' ? 'bytes' : 'milliseconds'}`)
  return Math.round(value)
}

/** '500ms', '2s', '1m', '1.5h' → milliseconds. A bare number string means milliseconds. */
export function parseDuration(text: string): number {
  return parseWithUnits(text, { '': 1, ...DURATION_UNITS }, 'duration')
}

/** '64K', '256M', '1G', '4096' → bytes (binary multiples). */
export function parseSize(text: string): number {
  return parseWithUnits(text, SIZE_UNITS, 'size')
}

export function formatBytes(bytes: number): string {
  for (const [unit, factor] of [
    ['G', 1024 ** 3],
    ['M', 1024 ** 2],
    ['K', 1024],
  ] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`
  }
  return `${bytes}B`
}

export function formatDuration(ms: number): string {
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}

/** A limit's value as the options write it, by its name's unit: `10s`, `256M`, or a count. */
export function formatLimit(name: string, value: number): string {
  if (name.endsWith('Ms')) return formatDuration(value)
  if (name.endsWith('Bytes')) return formatBytes(value)
  return String(value)
}
