import { type Diagnosis, doctor } from '../index.js'

/** What `cordon doctor` prints and its exit code: 1 when isolation auto cannot run a sandbox here. */
export function doctorReport(report: Diagnosis, json: boolean): { text: string; code: number } {
  const code = report.autoTier === null ? 1 : 0
  if (json) return { text: `${JSON.stringify(report, null, 2)}\n`, code }
  const lines = report.checks.map((c) => {
    const head = `${c.ok ? 'ok  ' : 'NO  '} ${c.name.padEnd(18)} ${c.detail}`
    return c.fix ? `${head}\n      fix: ${c.fix}` : head
  })
  const verdict =
    report.autoTier !== null
      ? `isolation "auto" runs the ${report.autoTier} tier here.`
      : report.usable.length > 0
        ? `isolation "auto" picks a tier that fails here (see above): auto runs end \`error\` until it is fixed; --isolation ${report.usable[0]} runs.`
        : 'no isolation tier can run here: every run ends `error` until the fixes above are made.'
  return { text: `${lines.join('\n')}\n\n${verdict}\n`, code }
}

export function doctorCommand(values: Record<string, unknown>): number {
  const { text, code } = doctorReport(doctor(), values.json === true)
  process.stdout.write(text)
  return code
}
