// `cordon rootfs create NAME --packages python3,...`, `cordon rootfs list` and `cordon rootfs delete NAME`.
import { createRootfs, deleteRootfs, listRootfs, rootfsCacheDir } from '../index.js'

export async function rootfsCreateCommand(name: string, values: Record<string, unknown>): Promise<number> {
  const packages = String(values.packages ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
  const info = await createRootfs(name, { packages, log: (line) => process.stderr.write(`${line}\n`) })
  process.stdout.write(`${info.name}\t${info.dir}\t${info.os ?? ''}\n`)
  return 0
}

export function rootfsListCommand(values: Record<string, unknown>): number {
  const list = listRootfs()
  if (values.json === true)
    process.stdout.write(`${JSON.stringify({ cacheDir: rootfsCacheDir(), rootfs: list })}\n`)
  else for (const r of list) process.stdout.write(`${r.name}\t${r.dir}\t${r.os ?? ''}\n`)
  return 0
}

export function rootfsDeleteCommand(name: string): number {
  deleteRootfs(name)
  return 0
}
