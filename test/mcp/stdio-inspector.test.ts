// test: slow (the MCP Inspector CLI against both transports)
// A real client other than the SDK's own pair: the MCP Inspector's CLI mode
// (@modelcontextprotocol/inspector-cli, a pinned devDependency), against `cordon mcp` (stdio) and `/mcp`
// on `cordon serve` (Streamable HTTP, with a key). Skipped, saying why, when the package is not installed.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { noNamespace, type Served, startServe, tempDir } from '../helpers.js'

const CLI = new URL('../../dist/cli/bin.cjs', import.meta.url).pathname

/** The installed inspector's build/index.js, or null. */
function inspectorEntry(): string | null {
  try {
    const pkg = createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector-cli/package.json')
    const entry = path.join(path.dirname(pkg), 'build', 'index.js')
    return existsSync(entry) ? entry : null
  } catch {
    return null
  }
}
const INSPECTOR = inspectorEntry()
const skip =
  noNamespace ||
  (!existsSync(CLI) && 'needs npm run build') ||
  (!INSPECTOR && '@modelcontextprotocol/inspector-cli is not installed (a devDependency: npm ci)')

const inspect = async (args: string[]): Promise<Record<string, unknown>> => {
  const entry = INSPECTOR as string
  const { stdout } = await promisify(execFile)(process.execPath, [entry, ...args], {
    // 1.0.3 imports "../package.json" relative to the working directory, not to itself: run it from its
    // build/, where that is its own package.json.
    cwd: path.dirname(entry),
    timeout: 60_000,
  })
  return JSON.parse(stdout) as Record<string, unknown>
}

describe('the MCP Inspector (CLI mode)', { skip }, () => {
  let served: Served | undefined
  after(async () => {
    served?.child.kill('SIGTERM')
    await served?.exited
  })

  it('lists and calls the tools of cordon mcp over stdio', async () => {
    const listed = await inspect(['node', CLI, 'mcp', '--timeout', '5s', '--method', 'tools/list'])
    const tools = listed.tools as { name: string; outputSchema?: unknown }[]
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      'cancel_run',
      'list_runs',
      'read_output',
      'run',
      'write_stdin',
    ])
    assert.ok(tools.every((t) => t.outputSchema))
    const called = await inspect([
      'node',
      CLI,
      'mcp',
      '--method',
      'tools/call',
      '--tool-name',
      'run',
      '--tool-arg',
      'shell=echo from the inspector',
    ])
    const s = called.structuredContent as { state: string; result: { stdout: string } }
    assert.equal(s.state, 'finished')
    assert.equal(s.result.stdout, 'from the inspector\n')
  })

  it('calls /mcp on cordon serve over Streamable HTTP with a key', async () => {
    served = await startServe(path.join(tempDir('cordon-mcp-insp-'), 'data'))
    const url = `${served.url}/mcp`
    const called = await inspect([
      url,
      '--transport',
      'http',
      '--header',
      `Authorization: Bearer ${served.adminKey}`,
      '--method',
      'tools/call',
      '--tool-name',
      'run',
      '--tool-arg',
      'shell=echo over http',
    ])
    const s = called.structuredContent as { result: { stdout: string } }
    assert.equal(s.result.stdout, 'over http\n')
    await assert.rejects(inspect([url, '--transport', 'http', '--method', 'tools/list']))
  })
})
