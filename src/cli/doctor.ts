import { diagnose } from '../plan/diagnose.js'

export function doctorCommand(values: Record<string, unknown>): number {
  const report = diagnose()
  if (values.json === true) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
    return 0
  }
  const lines = report.checks.map((c) => {
    const head = `${c.ok ? 'ok  ' : 'NO  '} ${c.name.padEnd(18)} ${c.detail}`
    return c.fix ? `${head}\n      fix: ${c.fix}` : head
  })
  process.stdout.write(`${lines.join('\n')}\n\nisolation "auto" runs the ${report.autoTier} tier here.\n`)
  return 0
}
