// The tools over the SDK's in-process pair, on a real service (real sandboxes): what each tool answers,
// the budget and paging, stdin, cancel, list, progress, the client's cancellation, and the key's policy.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import type { JsonSchemaType } from '@modelcontextprotocol/sdk/validation/types.js'
import { errorResult } from '../../src/index.js'
import { cutToBudget } from '../../src/mcp/budget.js'
import { createMcpServer, type McpToolsOptions } from '../../src/mcp/tools.js'
import { createService } from '../../src/service/service.js'
import type { KeyRecord } from '../../src/service/types.js'
import { noNamespace, tempDir } from '../helpers.js'

const skip = noNamespace

const closers: (() => Promise<void>)[] = []
after(async () => {
  for (const close of closers.reverse()) await close()
})

let made: Awaited<ReturnType<typeof createService>> | undefined
async function service() {
  if (!made) {
    made = await createService({ dataDir: path.join(tempDir('cordon-mcp-'), 'data'), concurrency: 4 })
    const s = made.service
    closers.push(() => s.close())
  }
  const { service } = made
  const admin = service.authenticate(made.adminKey as string) as KeyRecord
  return { service, admin }
}

async function connect(key: Record<string, unknown> = {}, options: Partial<McpToolsOptions> = {}) {
  const { service: s, admin } = await service()
  const { key: token } = s.createKey(admin, {
    name: 'mcp',
    scopes: ['runs:write', 'runs:read'],
    ceilings: { limits: { wallTimeMs: '20s' }, network: 'none' },
    ...key,
  })
  const record = s.authenticate(token) as KeyRecord
  const server = createMcpServer({ service: s, key: record, budget: 1024, ...options })
  const [a, b] = InMemoryTransport.createLinkedPair()
  const client = new Client({ name: 'test', version: '1' })
  await Promise.all([server.connect(a), client.connect(b)])
  closers.push(() => client.close())
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult
  return { client, call, service: s, key: record, transport: b }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('')
const structured = (r: CallToolResult) => r.structuredContent as Record<string, unknown>

describe('MCP tools', { skip }, () => {
  it('lists the tools with input and output schemas and says what they are', async () => {
    const { client } = await connect()
    const { tools } = await client.listTools()
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      'cancel_run',
      'list_runs',
      'read_output',
      'run',
      'write_stdin',
    ])
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name)
      assert.equal(t.outputSchema?.type, 'object', t.name)
    }
    const run = tools.find((t) => t.name === 'run')
    assert.equal(run?.annotations?.destructiveHint, true)
    // The key allows no network: the runs reach nothing outside.
    assert.equal(run?.annotations?.openWorldHint, false)
    assert.equal(tools.find((t) => t.name === 'read_output')?.annotations?.readOnlyHint, true)
  })

  it('run is open-world only when the key allows a network', async () => {
    const { client } = await connect({ ceilings: { network: ['none', 'allow'] } })
    const { tools } = await client.listTools()
    assert.equal(tools.find((t) => t.name === 'run')?.annotations?.openWorldHint, true)
  })

  it("run says this server's limits and hosts and that nothing persists; its schema takes the allowlist it shows", async () => {
    const { client, call } = await connect({
      ceilings: {
        limits: { wallTimeMs: '20s', memoryBytes: '128M' },
        network: { allow: ['example.com', '*.pypi.org'] },
      },
    })
    const { tools } = await client.listTools()
    const run = tools.find((t) => t.name === 'run')
    const said = String(run?.description)
    // The key's ceilings, the server's own (16M of output, 1 h of wall time at most), the library's defaults.
    assert.match(said, /wallTimeMs: default 20s, at most 20s/)
    assert.match(said, /memoryBytes: default 128M, at most 128M/)
    assert.match(said, /maxOutputBytes: default 1M, at most 16M/)
    assert.match(said, /maxProcesses: default 64[;,.]/)
    assert.match(said, /example\.com, \*\.pypi\.org/)
    assert.match(said, /"allow:example\.com"/)
    assert.match(said, /[Nn]othing persists between calls/)
    // The schema a client checks its call against takes each form the text shows.
    const validate = new AjvJsonSchemaValidator().getValidator(run?.inputSchema as JsonSchemaType)
    for (const network of ['none', 'allow:example.com', { allow: ['example.com'] }])
      assert.equal(validate({ cmd: ['true'], network }).valid, true, JSON.stringify(network))
    assert.equal(validate({ cmd: ['true'], network: 'everything' }).valid, false)
    // And the server takes it as the library does: a host past the ceiling is refused by name.
    const over = await call('run', { cmd: ['true'], network: 'allow:example.com,evil.example' })
    assert.equal(over.isError, true)
    assert.match(text(over), /over-ceiling: options\.network\.allow\.1: "evil\.example"/)

    // A key without a network: said so.
    const none = await connect()
    const { tools: closed } = await none.client.listTools()
    assert.match(String(closed.find((t) => t.name === 'run')?.description), /no network/)
  })

  it('reports the package version', async () => {
    const { client } = await connect()
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    assert.deepEqual(client.getServerVersion(), { name: 'cordon', version: pkg.version })
  })

  it('run: a command (argv or shell line) and its RunResult, with a text summary', async () => {
    const { call } = await connect()
    const r = await call('run', { cmd: ['sh', '-c', 'echo out; echo err >&2; exit 3'] })
    assert.equal(r.isError, undefined)
    const s = structured(r)
    assert.match(String(s.run_id), /^run_/)
    assert.equal(s.state, 'finished')
    const result = s.result as Record<string, unknown>
    assert.equal(result.status, 'nonzero-exit')
    assert.equal(result.exitCode, 3)
    assert.equal(result.stdout, 'out\n')
    assert.equal(result.stderr, 'err\n')
    assert.match(text(r), /finished: nonzero-exit \(exit code 3\)/)
    assert.match(text(r), /out\nerr\n|err\nout\n/)
    assert.ok(
      r.content.some((c) => c.type === 'resource_link' && c.uri === `cordon://runs/${s.run_id}/output`),
    )

    const shell = await call('run', { shell: 'echo "$((6 * 7))"', stdin: 'ignored' })
    assert.equal((structured(shell).result as { stdout: string }).stdout, '42\n')
    const both = await call('run', { cmd: ['true'], shell: 'true' })
    assert.equal(both.isError, true)
    assert.match(text(both), /either cmd .* or shell/)
  })

  it('run: files go into the workspace, stdin is read', async () => {
    const { call } = await connect()
    const r = await call('run', {
      cmd: ['sh', '-c', 'cat in.txt; tr a-z A-Z'],
      files: [{ path: 'in.txt', content: 'from a file\n' }],
      stdin: 'piped\n',
    })
    assert.equal((structured(r).result as { stdout: string }).stdout, 'from a file\nPIPED\n')
  })

  it('the key is the policy: a limit over its ceiling is refused, naming it; unset limits get the ceiling', async () => {
    const { call } = await connect()
    const over = await call('run', { cmd: ['true'], limits: { wallTimeMs: '1m' } })
    assert.equal(over.isError, true)
    assert.match(
      text(over),
      /over-ceiling: options\.limits\.wallTimeMs: 60s is over this key's ceiling of 20s/,
    )
    const net = await call('run', { cmd: ['true'], network: 'host' })
    assert.equal(net.isError, true)
    assert.match(text(net), /over-ceiling: options\.network/)
    const within = await call('run', { cmd: ['sleep', '5'], limits: { wallTimeMs: '300ms' } })
    assert.equal(within.isError, undefined, text(within))
    assert.equal((structured(within).result as { status: string }).status, 'timeout')
  })

  it('a key without runs:write cannot run, and sees only its own runs', async () => {
    const writer = await connect()
    const ran = await writer.call('run', { cmd: ['true'] })
    const reader = await connect({ scopes: ['runs:read'] })
    const r = await reader.call('run', { cmd: ['true'] })
    assert.equal(r.isError, true)
    assert.match(text(r), /forbidden: this key lacks the runs:write scope/)
    const other = await reader.call('read_output', { run_id: structured(ran).run_id })
    assert.equal(other.isError, true)
    assert.match(text(other), /not-found/)
  })

  it('a key without runs:read is refused run before a run is made (it could not wait for it)', async () => {
    const writeOnly = await connect({ scopes: ['runs:write'] })
    const r = await writeOnly.call('run', { cmd: ['true'] })
    assert.equal(r.isError, true)
    assert.match(text(r), /runs:read/)
    assert.deepEqual(writeOnly.service.store.listRuns({ limit: 10, keyId: writeOnly.key.id }).runs, [])
  })

  it('output past the budget is head and tail with a marker; read_output pages the whole of it', async () => {
    const { call } = await connect()
    const r = await call('run', { shell: 'seq 1 20000' })
    const whole = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('')
    const id = String(structured(r).run_id)
    const summary = text(r)
    const m = new RegExp(
      `\\[cut ${structured(r).boundary}: (\\d+) bytes; read_output run_id=${id} stream=output offset=(\\d+) limit=(\\d+) for them\\]`,
    ).exec(summary)
    assert.ok(m, summary)
    assert.ok(Buffer.byteLength(summary) < 1024 + 400, `${Buffer.byteLength(summary)} bytes`)
    const result = structured(r).result as { stdout: string; output: string; outputBytes: number }
    assert.equal(result.outputBytes, Buffer.byteLength(whole))
    assert.ok(Buffer.byteLength(result.stdout) < 1024 + 200)
    assert.match(result.stdout, /\[cut [0-9a-f]{12}: \d+ bytes; read_output .* stream=stdout /)

    // Paging from 0 with the default limit (the budget) gives back every byte.
    let offset = 0
    let all = ''
    for (let i = 0; i < 200; i++) {
      const page = structured(await call('read_output', { run_id: id, offset }))
      all += String(page.data)
      offset = Number(page.next_offset)
      if (page.eof) break
    }
    assert.equal(all, whole)
    const cutPage = structured(
      await call('read_output', { run_id: id, offset: Number(m[2]), limit: Number(m[3]) }),
    )
    assert.equal(Buffer.byteLength(String(cutPage.data)), Number(m[1]))
  })

  it('the log lines and the function’s value and error are within the budget too', async () => {
    // A program fills the log channel (maxLogBytes, 256 KiB by default): the result must not carry it all.
    const { call } = await connect()
    const r = await call('run', {
      shell:
        'i=0; while [ $i -lt 2000 ]; do echo "{\\"level\\":\\"info\\",\\"msg\\":\\"line $i of the log\\"}" >&$CORDON_LOG_FD; i=$((i+1)); done',
    })
    const result = structured(r).result as { logs: unknown[]; logsOmitted?: number; status: string }
    assert.equal(result.status, 'ok')
    assert.ok(Buffer.byteLength(JSON.stringify(result.logs)) <= 1024, `${JSON.stringify(result.logs).length}`)
    assert.ok((result.logsOmitted ?? 0) > 1900, String(result.logsOmitted))
    assert.ok(Buffer.byteLength(JSON.stringify(r)) < 8 * 1024, `${JSON.stringify(r).length} bytes`)

    const big = 'x'.repeat(100_000)
    const { call: callFn } = await connect(
      {},
      {
        functions: {
          names: ['echo', 'fail'],
          async call(name, args) {
            if (name === 'fail')
              return { ...errorResult('x', 'x'), status: 'error', error: { message: big } } as never
            return { ...errorResult('x', 'x'), status: 'ok', violation: null, value: args[0] }
          },
        },
      },
    )
    const echoed = await callFn('call_function', { name: 'echo', args: [big] })
    assert.ok(Buffer.byteLength(JSON.stringify(echoed)) < 8 * 1024, `${JSON.stringify(echoed).length} bytes`)
    const failed = await callFn('call_function', { name: 'fail' })
    assert.equal(failed.isError, true)
    assert.ok(Buffer.byteLength(JSON.stringify(failed)) < 8 * 1024, `${JSON.stringify(failed).length} bytes`)
  })

  it('run waits at most wait_ms, then gives the run id and the output so far; read_output follows it', async () => {
    const { call } = await connect()
    const r = await call('run', { shell: 'echo started; sleep 1; echo done', wait_ms: 300 })
    const s = structured(r)
    assert.equal(s.state, 'running')
    assert.equal(s.result, undefined)
    assert.deepEqual(s.output, { text: 'started\n', bytes: 8 })
    assert.match(
      text(r),
      new RegExp(
        `is running after 0\\.\\d s; 8 bytes of output so far:\\n\\[output ${s.boundary}\\]\\nstarted\\n\\[end ${s.boundary}\\]\\n`,
      ),
    )
    const next = structured(await call('read_output', { run_id: s.run_id, offset: 8, wait_ms: 10_000 }))
    assert.equal(next.data, 'done\n')
    assert.equal(next.next_offset, 13)
  })

  it('a running run’s output is read by its head and tail only, and shown as it was', async () => {
    // Each answer on a running run read all of its output so far (up to the output ceiling, 16 MiB) to
    // show a budget's worth of it. The service's reads are counted through a wrapper of it.
    const { service: s } = await service()
    let read = 0
    const counted: typeof s = {
      ...s,
      output(...args: Parameters<typeof s.output>) {
        const bytes = s.output(...args)
        read += bytes.length
        return bytes
      },
    }
    const budget = 1012 // its half ends inside a character, and the tail starts inside one
    const { call, key } = await connect({}, { service: counted, budget })
    const line = 'héllo wörld ✓\n'
    const lines = 450_000
    const total = Buffer.byteLength(line) * lines // 8.1 MB
    const r = await call('run', {
      shell: `yes '${line.trimEnd()}' | head -n ${lines}; sleep 30`,
      limits: { maxOutputBytes: '16M' },
      wait_ms: 2000,
    })
    const id = String(structured(r).run_id)
    assert.equal(structured(r).state, 'running')
    const shown = (bytes: number, boundary: unknown) =>
      cutToBudget(s.output(key, id, 'output', 0, bytes).toString('utf8'), budget, {
        runId: id,
        stream: 'output',
        boundary: String(boundary),
      }).text
    const so = structured(r).output as { text: string; bytes: number }
    assert.equal(so.text, shown(so.bytes, structured(r).boundary))
    assert.ok(read <= 2 * budget, `run read ${read} bytes`)

    const deadline = Date.now() + 20_000
    while (s.output(key, id, 'output', total - 1, 1).length === 0 && Date.now() < deadline) await sleep(100)
    // cancel_run that does not wait answers with the run still running.
    const server = createMcpServer({ service: counted, key, budget, maxWaitMs: 0 })
    const [a, b] = InMemoryTransport.createLinkedPair()
    const client = new Client({ name: 'test', version: '1' })
    await Promise.all([server.connect(a), client.connect(b)])
    closers.push(() => client.close())
    read = 0
    const c = (await client.callTool({ name: 'cancel_run', arguments: { run_id: id } })) as CallToolResult
    assert.equal(structured(c).state, 'running')
    const boundary = structured(c).boundary
    const expected = shown(total, boundary)
    assert.deepEqual(structured(c).output, { text: expected, bytes: total })
    assert.ok(
      text(c).includes(
        `; ${total} bytes of output so far:\n[output ${boundary}]\n${expected}${expected.endsWith('\n') ? '' : '\n'}[end ${boundary}]\nFollow it with`,
      ),
      text(c),
    )
    assert.match(
      expected,
      new RegExp(`read_output run_id=${id} stream=output offset=505 limit=${total - 1010} `),
    )
    assert.ok(read <= 2 * budget, `cancel_run read ${read} bytes of ${total}`)

    read = 0
    const page = structured(await call('read_output', { run_id: id, offset: 100 }))
    assert.equal(page.data, s.output(key, id, 'output', 100, budget).toString('utf8'))
    assert.ok(read <= 2 * budget, `read_output read ${read} bytes`)
  })

  it('a call that gets no wait slot answers at once instead of waiting', async () => {
    let given = 0
    const { call } = await connect({}, { holds: { take: () => false, give: () => void given++ } })
    const started = Date.now()
    const r = await call('run', { cmd: ['sleep', '5'], wait_ms: 10_000 })
    assert.equal(structured(r).state === 'finished', false)
    const page = await call('read_output', { run_id: structured(r).run_id, wait_ms: 10_000 })
    assert.equal(structured(page).data, '')
    assert.ok(Date.now() - started < 4000, `${Date.now() - started} ms`)
    assert.equal(given, 0)
    await call('cancel_run', { run_id: structured(r).run_id })
  })

  it('write_stdin feeds a run started with stdin_open, and close ends its input', async () => {
    const { call } = await connect()
    const r = await call('run', {
      cmd: ['sh', '-c', 'while read l; do echo "got $l"; done; echo eof'],
      stdin: 'one\n',
      stdin_open: true,
      wait_ms: 0,
    })
    const id = structured(r).run_id
    const w = await call('write_stdin', { run_id: id, data: 'two\n', close: true })
    assert.deepEqual(structured(w), { run_id: id, state: structured(w).state, written: 4, closed: true })
    const page = structured(await call('read_output', { run_id: id, wait_ms: 10_000 }))
    // Wait for the end of it.
    let data = String(page.data)
    for (let i = 0; i < 50 && !data.includes('eof'); i++)
      data += String(
        structured(await call('read_output', { run_id: id, offset: Buffer.byteLength(data), wait_ms: 2000 }))
          .data,
      )
    assert.equal(data, 'got one\ngot two\neof\n')
    const closed = await call('write_stdin', { run_id: id, data: 'x' })
    assert.equal(closed.isError, true)
    assert.match(text(closed), /conflict: .* has no open stdin/)
  })

  it('cancel_run stops the sandbox and answers its result; list_runs lists the key’s runs', async () => {
    const { call } = await connect()
    const r = await call('run', { cmd: ['sleep', '30'], wait_ms: 0 })
    const id = structured(r).run_id
    const c = await call('cancel_run', { run_id: id })
    assert.equal(structured(c).state, 'finished')
    assert.equal((structured(c).result as { status: string }).status, 'canceled')
    const list = structured(await call('list_runs', {}))
    const rows = list.runs as { run_id: string; status: string | null; cmd: string[] }[]
    assert.equal(rows.length, 1)
    assert.deepEqual(rows[0], { ...rows[0], run_id: id, status: 'canceled', cmd: ['sleep', '30'] })
    assert.equal(list.next_cursor, null)
  })

  it('with a progress token, the newest output line comes as progress notifications', async () => {
    const { client } = await connect()
    const seen: { progress: number; message?: string }[] = []
    const r = (await client.callTool(
      { name: 'run', arguments: { shell: 'for i in 1 2 3; do echo "step $i"; sleep 0.4; done' } },
      undefined,
      { onprogress: (p) => void seen.push(p) },
    )) as CallToolResult
    assert.equal((structured(r).result as { status: string }).status, 'ok')
    assert.ok(seen.length >= 2, JSON.stringify(seen))
    assert.ok(
      seen.some((p) => p.message === 'step 2'),
      JSON.stringify(seen),
    )
    for (let i = 1; i < seen.length; i++) assert.ok((seen[i]?.progress ?? 0) > (seen[i - 1]?.progress ?? 0))
  })

  it('a call the client cancels cancels its sandbox', async () => {
    const { client, service: s, key } = await connect()
    const controller = new AbortController()
    const calling = client.callTool({ name: 'run', arguments: { cmd: ['sleep', '30'] } }, undefined, {
      signal: controller.signal,
    })
    let id: string | undefined
    for (let i = 0; i < 100 && !id; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      id = s.list(key, { limit: 1 }).runs[0]?.id
    }
    assert.ok(id)
    controller.abort()
    await assert.rejects(calling)
    const run = await s.wait(key, id, 10_000)
    assert.equal(run.result?.status, 'canceled')
  })

  it('a call cancelled before its handler ran starts no sandbox', async () => {
    // The request and its cancellation read in one chunk: the SDK aborts the call's signal before the
    // tool's handler runs (it starts a microtask later, after validating the input).
    const { service: s, key, transport } = await connect()
    const request = { jsonrpc: '2.0' as const, id: 'early', method: 'tools/call' }
    void transport.send({ ...request, params: { name: 'run', arguments: { cmd: ['sleep', '30'] } } })
    void transport.send({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 'early' },
    })
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const going = s.list(key, { limit: 10 }).runs.filter((r) => r.state !== 'finished')
    assert.deepEqual(
      going.map((r) => r.id),
      [],
      'a run the client cancelled is still going',
    )
  })

  it('list_runs shows long commands shortened, not whole', async () => {
    // An agent's shell scripts run to kilobytes each: twenty of them listed must not flood the model.
    const { call } = await connect()
    const script = `true ${'# a long script line\n'.repeat(250)}`
    for (let i = 0; i < 3; i++) await call('run', { shell: script, wait_ms: 0 })
    const listed = await call('list_runs', {})
    const rows = (structured(listed).runs as { cmd: string[] }[]).slice(0, 3)
    assert.equal(rows.length, 3)
    for (const row of rows) {
      assert.equal(row.cmd[0], 'sh')
      assert.ok(Buffer.byteLength(row.cmd.join(' ')) <= 300, row.cmd.join(' '))
    }
    assert.ok(Buffer.byteLength(JSON.stringify(listed)) < 4096, `${JSON.stringify(listed).length} bytes`)
  })

  it('a run’s output is a resource', async () => {
    const { client, call } = await connect()
    const r = await call('run', { shell: 'echo a; echo b >&2' })
    const id = structured(r).run_id
    const out = await client.readResource({ uri: `cordon://runs/${id}/stderr` })
    const content = out.contents[0] as { uri: string; mimeType: string; text: string }
    assert.equal(content.uri, `cordon://runs/${id}/stderr`)
    assert.equal(content.mimeType, 'text/plain')
    // Framed as the tools' texts are, by a token of its own.
    const m = /^\[stderr ([0-9a-f]{12}): run (\S+)\]\nb\n\[end \1: all 2 bytes\]$/.exec(content.text)
    assert.ok(m, content.text)
    assert.equal(m[2], id)
  })

  it('a resource holds at most 256 KiB of output, and says how to read the rest', async () => {
    // It was read whole (up to the output ceiling, 16 MiB) into one answer, outside any budget.
    const { client, call } = await connect()
    const r = await call('run', {
      shell: 'head -c 3000000 /dev/zero | tr "\\0" a',
      limits: { maxOutputBytes: '4M' },
    })
    const id = structured(r).run_id
    const out = await client.readResource({ uri: `cordon://runs/${id}/stdout` })
    const got = (out.contents[0] as { text: string }).text
    assert.ok(Buffer.byteLength(got) < 256 * 1024 + 512, `${Buffer.byteLength(got)} bytes`)
    assert.ok(got.split('\n')[1]?.startsWith('a'.repeat(256 * 1024)))
    assert.match(got, new RegExp(`read_output run_id=${id} stream=stdout offset=${256 * 1024}\\b`))
    // What fits is whole, with no marker.
    const small = await call('run', { shell: 'head -c 1000 /dev/zero | tr "\\0" b' })
    const whole = await client.readResource({ uri: `cordon://runs/${structured(small).run_id}/output` })
    assert.match(
      (whole.contents[0] as { text: string }).text,
      /^\[output \w+: run \S+\]\nb{1000}\n\[end \w+: all 1000 bytes\]$/,
    )
  })

  it('call_function exists only with registered functions, and calls only those', async () => {
    const calls: string[] = []
    const { client, call } = await connect(
      {},
      {
        functions: {
          names: ['add'],
          async call(name, args) {
            calls.push(name)
            const value = (args[0] as number) + (args[1] as number)
            return { ...errorResult('x', 'x'), status: 'ok', violation: null, value }
          },
        },
      },
    )
    const { tools } = await client.listTools()
    assert.ok(tools.some((t) => t.name === 'call_function'))
    const r = await call('call_function', { name: 'add', args: [1, 2] })
    assert.match(text(r), /^add returned:\n\[value (\w{12})\]\n3\n\[end \1\]$/)
    const other = await call('call_function', { name: 'rm', args: [] })
    assert.equal(other.isError, true)
    assert.deepEqual(calls, ['add'])
  })
})
