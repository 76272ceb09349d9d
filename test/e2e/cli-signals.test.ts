// The CLI owns its process's signals: Ctrl-C, SIGTERM and a closed terminal (SIGHUP) cancel the sandbox.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { marker, noLauncher, processesWith, waitFor } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

describe('cordon run and signals', { skip: noLauncher }, () => {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    it(`${sig} cancels the sandbox: exit 130, nothing left running`, async () => {
      const m = marker()
      const script = `echo started; exec sleep ${m}`
      const child = spawn(process.execPath, [CLI, 'run', '--timeout', '60s', '--', 'sh', '-c', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let stdout = ''
      let stderr = ''
      child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
      child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
      const closed = new Promise<number | null>((resolve) => child.on('close', resolve))
      // Its own output says the program runs (the marker is in cordon's own argv too).
      assert.ok(await waitFor(() => stdout.includes('started'), 15_000), `never started: ${stderr}`)
      child.kill(sig)
      const code = await closed
      assert.equal(code, 130, stderr)
      assert.deepEqual(processesWith(m), [])
    })
  }
})
