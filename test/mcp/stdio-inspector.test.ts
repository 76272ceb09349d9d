// A real client other than the SDK's own pair: the MCP Inspector's CLI mode, against `cordon mcp` (stdio)
// and `/mcp` on `cordon serve` (Streamable HTTP). Tests download nothing: give the path of an installed
// @modelcontextprotocol/inspector-cli's build/index.js in CORDON_MCP_INSPECTOR, e.g.
//   npm install --prefix /tmp/inspector @modelcontextprotocol/inspector-cli@1.0.3
//   CORDON_MCP_INSPECTOR=/tmp/inspector/node_modules/@modelcontextprotocol/inspector-cli/build/index.js
// (1.0.3 finds its own package.json relative to the working directory, so it is run from its build/.)
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { noNamespace, type Served, startServe, tempDir } from '../helpers.js'

const CLI = new URL('../../dist/cli/bin.cjs', import.meta.url).pathname
const INSPECTOR = process.env.CORDON_MCP_INSPECTOR ?? ''
const skip =
  noNamespace ||
  (!existsSync(CLI) && 'needs npm run build') ||
  (!existsSync(INSPECTOR) && 'set CORDON_MCP_INSPECTOR to an installed inspector-cli build/index.js')

const inspect = async (args: string[]): Promise<Record<string, unknown>> => {
  const { stdout } = await promisify(execFile)(process.execPath, [INSPECTOR, ...args], {
    cwd: path.dirname(INSPECTOR),
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
