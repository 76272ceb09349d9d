// Where the service keeps its data by default: the database, the runs' workspaces and collected files.
import os from 'node:os'
import path from 'node:path'

/** $XDG_DATA_HOME/cordon, or ~/.local/share/cordon. */
export function defaultDataDir(): string {
  const base = process.env.XDG_DATA_HOME || path.join(os.homedir(), '.local', 'share')
  return path.join(base, 'cordon')
}
