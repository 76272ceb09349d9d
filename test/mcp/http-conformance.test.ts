// test: slow (the MCP conformance suite against a real server)
// The MCP conformance suite (@modelcontextprotocol/conformance, a pinned devDependency) against `/mcp` on a
// real `cordon serve`, in the scenarios that apply to a server of this kind. Most of the suite's server
// scenarios call tools, prompts and resources of its own reference server (`test_simple_text`,
// `test://static-text`…), or features cordon does not offer: those are excluded below, each with why,
// and every scenario the suite lists must be one or the other, so a new version's scenarios are seen.
// The suite sends no Authorization header, and auth is not what it tests: it talks to cordon through a
// loopback proxy here that adds the key. It speaks only HTTP (no stdio server), and needs Node >= 22.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import http from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { type Served, startServe, tempDir } from '../helpers.js'

const CLI = new URL('../../dist/cli/bin.cjs', import.meta.url).pathname

/** The installed suite's CLI, or null. */
function suiteEntry(): string | null {
  try {
    const pkg = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/package.json')
    const entry = path.join(path.dirname(pkg), 'dist', 'index.js')
    return existsSync(entry) ? entry : null
  } catch {
    return null
  }
}
const SUITE = suiteEntry()
const nodeMajor = Number(process.versions.node.split('.')[0])
const skip =
  (nodeMajor < 22 && `the conformance suite needs Node >= 22 (this is ${process.versions.node})`) ||
  (!existsSync(CLI) && 'needs npm run build') ||
  (!SUITE && '@modelcontextprotocol/conformance is not installed (a devDependency: npm ci)')

/** Scenarios that apply to cordon's server, and pass. */
// dns-rebinding-protection: a Host that is not served gets 403 before any route (src/service/hosts.ts).
const APPLIES = [
  'server-initialize',
  'ping',
  'tools-list',
  'resources-list',
  'dns-rebinding-protection',
] as const

const REFERENCE_TOOLS = 'calls a tool of the suite’s reference server (test_*), which cordon does not have'
const REFERENCE_RESOURCES =
  'reads a resource of the suite’s reference server (test://…), which cordon does not have'
const NO_PROMPTS = 'cordon offers no prompts'
const STATELESS =
  '/mcp is stateless (no Mcp-Session-Id, no standalone GET stream: 405), which this scenario needs'
/** Scenarios that do not apply, and why. */
const EXCLUDED: Record<string, string> = {
  'logging-set-level': 'cordon does not offer the logging capability (logging/setLevel)',
  'completion-complete': 'cordon offers no completions (no prompts, no completable resource arguments)',
  'tools-call-simple-text': REFERENCE_TOOLS,
  'tools-call-image': REFERENCE_TOOLS,
  'tools-call-audio': REFERENCE_TOOLS,
  'tools-call-embedded-resource': REFERENCE_TOOLS,
  'tools-call-mixed-content': REFERENCE_TOOLS,
  'tools-call-with-logging': REFERENCE_TOOLS,
  'tools-call-error': REFERENCE_TOOLS,
  'tools-call-with-progress': `${REFERENCE_TOOLS} (run's progress is tested in tools.test.ts and http.test.ts)`,
  'tools-call-sampling': 'cordon never asks the client for sampling',
  'tools-call-elicitation': 'cordon never asks the client for elicitation',
  'elicitation-sep1034-defaults': 'cordon never asks the client for elicitation',
  'elicitation-sep1330-enums': 'cordon never asks the client for elicitation',
  'json-schema-2020-12': `${REFERENCE_TOOLS} (json_schema_2020_12_tool)`,
  'server-sse-polling': STATELESS,
  'server-sse-multiple-streams': STATELESS,
  'resources-read-text': REFERENCE_RESOURCES,
  'resources-read-binary': REFERENCE_RESOURCES,
  'resources-templates-read': REFERENCE_RESOURCES,
  'resources-subscribe': 'cordon offers no resource subscriptions (a run’s output is read, not pushed)',
  'resources-unsubscribe': 'cordon offers no resource subscriptions',
  'prompts-list': NO_PROMPTS,
  'prompts-get-simple': NO_PROMPTS,
  'prompts-get-with-args': NO_PROMPTS,
  'prompts-get-embedded-resource': NO_PROMPTS,
  'prompts-get-with-image': NO_PROMPTS,
}

const run = promisify(execFile)

/** A loopback proxy to `target` adding `Authorization: Bearer <key>` to every request. */
function authProxy(target: string, key: string): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target)
  const server = http.createServer((req, res) => {
    const up = http.request(
      {
        host: to.hostname,
        port: to.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, authorization: `Bearer ${key}` },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      },
    )
    up.on('error', (error) => {
      if (!res.headersSent) res.writeHead(502)
      res.end(String(error))
    })
    req.pipe(up)
  })
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          }),
      })
    })
  })
}

interface Check {
  id: string
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string
  errorMessage?: string
}

describe('the MCP conformance suite against /mcp', { skip }, () => {
  let served: Served | undefined
  let proxy: { url: string; close(): Promise<void> } | undefined
  let out = ''
  before(async () => {
    out = tempDir('cordon-mcp-conf-')
    served = await startServe(path.join(out, 'data'))
    proxy = await authProxy(served.url, served.adminKey as string)
  })
  after(async () => {
    await proxy?.close()
    served?.child.kill('SIGTERM')
    await served?.exited
  })

  it('every scenario it lists applies or is excluded with a reason', async () => {
    const { stdout } = await run(process.execPath, [SUITE as string, 'list', '--server'])
    const listed = [...stdout.matchAll(/^\s*- (\S+)/gm)].map((m) => m[1] as string)
    assert.ok(listed.length > 0, stdout)
    const unjudged = listed.filter((s) => !(APPLIES as readonly string[]).includes(s) && !(s in EXCLUDED))
    assert.deepEqual(unjudged, [], 'scenarios neither applying nor excluded')
  })

  for (const scenario of APPLIES) {
    it(`passes ${scenario}`, async () => {
      const dir = path.join(out, scenario)
      await run(
        process.execPath,
        [SUITE as string, 'server', '--url', `${proxy?.url}/mcp`, '--scenario', scenario, '-o', dir],
        { timeout: 60_000 },
      ).catch((error: { stdout?: string }) => error) // a failure is read from its checks below
      const [only] = readdirSync(dir)
      const checks = JSON.parse(
        readFileSync(path.join(dir, only as string, 'checks.json'), 'utf8'),
      ) as Check[]
      const failed = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')
      assert.deepEqual(
        failed.map((c) => `${c.id}: ${c.errorMessage ?? c.status}`),
        [],
      )
      assert.ok(
        checks.some((c) => c.status === 'SUCCESS'),
        `no check passed: ${JSON.stringify(checks)}`,
      )
    })
  }
})
