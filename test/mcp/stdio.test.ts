// `cordon mcp` as a client starts it: the built bin spawned over stdio by the SDK's client.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { operatorPolicy, parseBudget, parseFunction } from '../../src/mcp/stdio.js'
import { noNamespace, notRoot, processesWith, tempDir, waitFor, worldWritableDir } from '../helpers.js'

const CLI = new URL('../../dist/cli/bin.cjs', import.meta.url).pathname
const skip = noNamespace || (!existsSync(CLI) && 'needs npm run build')

async function start(args: string[]) {
  // Its own TMPDIR: the private data dir lands there, and must be gone after.
  const tmp = tempDir('cordon-mcp-tmp-')
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, 'mcp', ...args],
    env: {
      ...getDefaultEnvironment(),
      TMPDIR: tmp,
      CORDON_TEST_SECRET: 's3cret',
      CORDON_TEST_OTHER: 'other',
    },
    stderr: 'pipe',
  })
  const client = new Client({ name: 'test', version: '1' })
  await client.connect(transport)
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult
  return { client, transport, call, tmp }
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('')
const result = (r: CallToolResult) => (r.structuredContent as { result: Record<string, unknown> }).result

describe('operatorPolicy', () => {
  it('makes the flags the ceilings, and the rest fixed options of every run', () => {
    const { ceilings, fixed } = operatorPolicy({
      limits: { wallTimeMs: '2m' },
      network: 'allow:pypi.org',
      env: { A: 'b' },
      isolation: 'namespace',
    })
    const limits = ceilings.limits as Record<string, number>
    assert.equal(limits.wallTimeMs, 120_000)
    // A limit the operator left alone is bounded by the library's default.
    assert.equal(limits.memoryBytes, 512 * 1024 * 1024)
    assert.deepEqual(ceilings.network, {
      allow: ['pypi.org'],
      deny: [],
      allowLoopback: false,
      allowPrivate: false,
      allowMetadata: false,
    })
    assert.equal(ceilings.isolation, 'namespace')
    assert.deepEqual(fixed, { network: 'allow:pypi.org', env: { A: 'b' }, isolation: 'namespace' })
    assert.equal(operatorPolicy({}).ceilings.network, 'none')
  })

  it('keeps the host paths apart (resolved), for the service, and refuses invalid flags, naming the field', () => {
    const { fixed, host } = operatorPolicy({
      cwd: 'proj',
      writable: ['proj', '/tmp/x'],
      passEnv: ['HOME'],
      env: { A: 'b' },
    })
    assert.deepEqual(fixed, { env: { A: 'b' } })
    assert.deepEqual(host, {
      cwd: path.resolve('proj'),
      writable: [path.resolve('proj'), '/tmp/x'],
      passEnv: ['HOME'],
    })
    assert.equal(operatorPolicy({}).host, undefined)
    assert.throws(() => operatorPolicy({ limits: { wallTimeMs: 'soon' } }), {
      name: 'PolicyError',
      field: 'limits.wallTimeMs',
    })
    assert.equal(parseBudget('16K'), 16 * 1024)
    assert.throws(() => parseBudget('10B'), { field: 'output-budget' })
    assert.deepEqual(parseFunction('add=./x.mjs#add'), {
      name: 'add',
      module: path.resolve('x.mjs'),
      exportName: 'add',
    })
    assert.throws(() => parseFunction('./x.mjs#add'), { field: 'function' })
  })
})

describe('operatorPolicy: --rootfs', () => {
  it('keeps a rootfs path the operator’s (resolved, a host option), and a name a ceiling and fixed', () => {
    const byPath = operatorPolicy({ rootfs: './trees/min', env: { A: 'b' } })
    assert.deepEqual(byPath.host, { rootfs: path.resolve('trees/min') })
    assert.deepEqual(byPath.fixed, { env: { A: 'b' } })
    // A tool input may name no root filesystem then: the operator's is every run's.
    assert.deepEqual(byPath.ceilings.rootfs, [])
    const byName = operatorPolicy({ rootfs: 'bookworm' })
    assert.deepEqual(byName.ceilings.rootfs, ['bookworm'])
    assert.deepEqual(byName.fixed, { rootfs: 'bookworm' })
    assert.equal(byName.host, undefined)
  })
})

/**
 * A root filesystem made of the host's /bin/sh and the libraries it loads, nothing else (no coreutils, no
 * node): a run in it can tell it is there. Null when the host's sh cannot be copied so (no ldd).
 */
function shellOnlyRootfs(): string | null {
  const sh = realpathSync('/bin/sh')
  const ldd = spawnSync('ldd', [sh], { encoding: 'utf8' })
  if (ldd.status !== 0) return null
  const dir = tempDir('cordon-mcp-rootfs-', { mode: 0o755 })
  // The merged-/usr layout: /bin, /lib and /lib64 lead into /usr.
  const inUsr = (p: string) => path.join(dir, 'usr', p.replace(/^\/usr\//, '/'))
  for (const name of ['bin', 'lib', 'lib64']) {
    mkdirSync(path.join(dir, 'usr', name), { recursive: true, mode: 0o755 })
    symlinkSync(`usr/${name}`, path.join(dir, name))
  }
  copyFileSync(sh, path.join(dir, 'usr/bin/sh'))
  chmodSync(path.join(dir, 'usr/bin/sh'), 0o755)
  for (const lib of ldd.stdout.match(/\/\S+/g) ?? []) {
    mkdirSync(path.dirname(inUsr(lib)), { recursive: true, mode: 0o755 })
    copyFileSync(lib, inUsr(lib))
    chmodSync(inUsr(lib), 0o755)
  }
  return dir
}

describe('cordon mcp (stdio, the real bin)', { skip }, () => {
  it('serves the tools within its flags, calls registered functions, and cleans up when the client leaves', async () => {
    const dir = worldWritableDir()
    const module = path.join(dir, 'tools.mjs')
    writeFileSync(module, 'export function add(a, b) { return a + b }\n', { mode: 0o644 })
    const { client, transport, call, tmp } = await start([
      '--timeout',
      '5s',
      '--env',
      'GREETING=hello',
      '--env',
      'CORDON_TEST_SECRET',
      '--redact',
      's3cret',
      '--function',
      `add=${module}#add`,
      '--output-budget',
      '512B',
    ])
    try {
      const { tools } = await client.listTools()
      assert.deepEqual(tools.map((t) => t.name).sort(), [
        'call_function',
        'cancel_run',
        'list_runs',
        'read_output',
        'run',
        'write_stdin',
      ])
      assert.equal(tools.find((t) => t.name === 'run')?.annotations?.openWorldHint, false)
      // The package's version, and the operator's flags as this server's limits, in the run tool's text.
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
      assert.equal(client.getServerVersion()?.version, pkg.version)
      const said = String(tools.find((t) => t.name === 'run')?.description)
      assert.match(said, /wallTimeMs: default 5s, at most 5s/)
      assert.match(said, /no network/)
      assert.match(said, /nothing persists between calls \(/)

      // The fixed options (--env, --redact) are in every run.
      const r = await call('run', { shell: 'echo "$GREETING $CORDON_TEST_SECRET"' })
      assert.equal(result(r).stdout, 'hello [REDACTED]\n')
      // The flags are the ceilings.
      const over = await call('run', { cmd: ['true'], limits: { wallTimeMs: '10s' } })
      assert.equal(over.isError, true)
      assert.match(
        text(over),
        /over-ceiling: options\.limits\.wallTimeMs: 10s is over this key's ceiling of 5s/,
      )
      const net = await call('run', { cmd: ['true'], network: 'host' })
      assert.equal(net.isError, true)
      // The budget (--output-budget 512B).
      const big = await call('run', { shell: 'seq 1 2000' })
      assert.ok(Buffer.byteLength(String(result(big).stdout)) < 512 + 200)
      assert.match(text(big), /\[cut \w{12}: \d+ bytes; read_output run_id=run_\S+ stream=output offset=256 /)

      const f = await call('call_function', { name: 'add', args: [2, 3] })
      assert.match(text(f), /^add returned:\n\[value (\w{12})\]\n5\n\[end \1\]$/)
      assert.equal(result(f).value, 5)
      assert.ok(readdirSync(tmp).some((n) => n.startsWith('cordon-mcp-')))
    } finally {
      await client.close()
    }
    // Its stdin closed: the server stopped and removed its private data dir.
    const pid = transport.pid
    assert.ok(
      await waitFor(() => readdirSync(tmp).every((n) => !n.startsWith('cordon-mcp-')), 10_000),
      String(readdirSync(tmp)),
    )
    if (pid) assert.ok(await waitFor(() => !existsSync(`/proc/${pid}`), 10_000))
  })

  it('calls functions no more at once than --concurrency, as runs', async () => {
    // Each call_function is a sandbox of the flags' memory: a model calling it 20 times in parallel
    // must not get 20 sandboxes when the operator said 1 at once.
    const dir = worldWritableDir()
    const module = path.join(dir, 'slow.mjs')
    writeFileSync(
      module,
      'export async function slow() { const t0 = Date.now(); await new Promise((r) => setTimeout(r, 700)); return [t0, Date.now()] }\n',
      { mode: 0o644 },
    )
    const { client, call } = await start(['--concurrency', '1', '--function', `slow=${module}#slow`])
    try {
      const calls = await Promise.all([1, 2, 3].map(() => call('call_function', { name: 'slow' })))
      const spans = calls.map((c) => {
        assert.equal(c.isError, undefined, text(c))
        return result(c).value as [number, number]
      })
      spans.sort((a, b) => a[0] - b[0])
      for (let i = 1; i < spans.length; i++)
        assert.ok(
          (spans[i] as [number, number])[0] >= (spans[i - 1] as [number, number])[1],
          `overlap: ${JSON.stringify(spans)}`,
        )
    } finally {
      await client.close()
    }
  })

  it('holds at most 32 waiting calls at once; past them a call answers at once', async () => {
    // Each waiting read_output polls the store every 200 ms for up to 5 min: a client sending thousands
    // of them in parallel would keep the process busy polling.
    const { client, call } = await start(['--timeout', '20s'])
    try {
      const r = await call('run', { cmd: ['sleep', '10'], wait_ms: 0 })
      const id = (r.structuredContent as { run_id: string }).run_id
      const t0 = Date.now()
      const took = await Promise.all(
        Array.from({ length: 40 }, async () => {
          await call('read_output', { run_id: id, wait_ms: 2000 })
          return Date.now() - t0
        }),
      )
      const early = took.filter((ms) => ms < 1500).length
      assert.equal(early, 8, JSON.stringify(took))
      await call('cancel_run', { run_id: id })
    } finally {
      await client.close()
    }
  })

  it('keeps the newest --keep-runs runs: a model looping runs cannot fill $TMPDIR', async () => {
    // Each run keeps up to --max-output in the private data dir (often RAM-backed /tmp).
    const { client, call } = await start(['--keep-runs', '3'])
    try {
      const ids: string[] = []
      for (let i = 0; i < 5; i++) {
        const r = await call('run', { cmd: ['echo', `run ${i}`] })
        ids.push((r.structuredContent as { run_id: string }).run_id)
      }
      const listed = await call('list_runs', {})
      const runs = (listed.structuredContent as { runs: { run_id: string }[] }).runs
      assert.deepEqual(
        runs.map((r) => r.run_id).sort(),
        ids.slice(2).sort(),
        'the three newest, the oldest removed',
      )
      const gone = await call('read_output', { run_id: ids[0] })
      assert.equal(gone.isError, true)
      assert.match(text(await call('read_output', { run_id: ids[4] })), /run 4/)

      // A run still going is not removed: it goes at the first submission after it finished.
      const slow = await call('run', { cmd: ['sleep', '1'], wait_ms: 0 })
      const slowId = (slow.structuredContent as { run_id: string }).run_id
      for (let i = 0; i < 3; i++) await call('run', { cmd: ['true'] })
      const ran = (await call('read_output', { run_id: slowId })) as CallToolResult
      assert.notEqual(ran.isError, true, 'kept while it runs, past the newest three')
      await call('read_output', { run_id: slowId, wait_ms: 10_000 })
      await call('run', { cmd: ['true'] })
      assert.equal((await call('read_output', { run_id: slowId })).isError, true, 'removed once finished')
    } finally {
      await client.close()
    }
  })

  it('a hangup (the terminal or the client gone) stops it as SIGTERM does: sandboxes killed, data dir removed', async () => {
    const marker = `cordon-mcp-hup-${process.pid}`
    const { client, transport, call, tmp } = await start(['--timeout', '30s'])
    try {
      const r = await call('run', { shell: `sleep 25 # ${marker}`, wait_ms: 0 })
      assert.equal((r.structuredContent as { state: string }).state !== 'finished', true)
      assert.ok(await waitFor(() => processesWith(marker).length > 0, 10_000), 'the sandbox never started')
      const pid = transport.pid as number
      process.kill(pid, 'SIGHUP')
      assert.ok(await waitFor(() => !existsSync(`/proc/${pid}`), 10_000), 'still running after SIGHUP')
      assert.ok(await waitFor(() => processesWith(marker).length === 0, 10_000), 'sandbox left behind')
      assert.deepEqual(
        readdirSync(tmp).filter((n) => n.startsWith('cordon-mcp-')),
        [],
        'data dir left behind',
      )
    } finally {
      await client.close().catch(() => undefined)
    }
  })

  it("runs in the operator's directory, writes only where the operator said, passes only the named env", async () => {
    const project = worldWritableDir('cordon-mcp-proj-')
    const elsewhere = worldWritableDir('cordon-mcp-else-')
    const { call, client } = await start([
      '--cwd',
      project,
      '--writable',
      project,
      '--pass-env',
      'CORDON_TEST_SECRET',
      '--timeout',
      '10s',
    ])
    try {
      const { tools } = await client.listTools()
      const said = String(tools.find((t) => t.name === 'run')?.description)
      assert.ok(said.includes(`nothing persists between calls but what a run writes under ${project}`), said)
      const r = await call('run', {
        shell: `pwd; echo made > made.txt; echo no > ${elsewhere}/escaped.txt; echo "[\${#CORDON_TEST_SECRET}|\${CORDON_TEST_OTHER:-unset}]"`,
      })
      const out = String(result(r).stdout)
      assert.equal(out.split('\n')[0], project)
      // Passed by name (redacted from the output, its name looks secret: its length says it is there); CORDON_TEST_OTHER,
      // not named, is not.
      assert.match(out, /\[6\|unset\]/)
      assert.equal(readFileSync(path.join(project, 'made.txt'), 'utf8'), 'made\n')
      assert.ok(!existsSync(path.join(elsewhere, 'escaped.txt')), 'wrote outside the writable dir')

      // No tool input names a host path: unknown fields are dropped, `files` is refused with a cwd.
      const named = await call('run', { shell: 'pwd; touch x', cwd: elsewhere, writable: [elsewhere] })
      if (!named.isError) assert.equal(String(result(named).stdout).trim(), project)
      assert.ok(!existsSync(path.join(elsewhere, 'x')))
      const files = await call('run', { cmd: ['true'], files: [{ path: 'a.txt', content: 'b' }] })
      assert.equal(files.isError, true)
      assert.match(text(files), /^forbidden-option: files: runs start in the operator's directory/)
      assert.ok(!existsSync(path.join(project, 'a.txt')))
    } finally {
      await client.close()
    }
  })

  it('refuses at start a host path its sandboxes cannot reach, naming the flag (exit 125)', {
    skip: notRoot,
  }, () => {
    // Root's 0700 directory: the sandbox's pool uid may not write a directory in it.
    const shut = tempDir('cordon-mcp-shut-')
    const project = path.join(shut, 'proj')
    mkdirSync(project)
    const out = spawnSync(process.execPath, [CLI, 'mcp', '--cwd', project, '--writable', project], {
      encoding: 'utf8',
      input: '',
      env: { ...process.env, TMPDIR: tempDir('cordon-mcp-tmp-') },
    })
    assert.equal(out.status, 125, out.stderr)
    assert.match(
      out.stderr,
      new RegExp(`^cordon: --writable: ${project} is not writable by the sandbox user`, 'm'),
    )
    assert.equal(out.stdout, '')
  })

  it('runs every run in the operator’s --rootfs DIR, as cordon run --rootfs DIR does', async (t) => {
    const rootfs = shellOnlyRootfs()
    if (!rootfs) return t.skip('no ldd to copy the host’s sh with its libraries')
    const { client, call } = await start(['--rootfs', rootfs])
    try {
      const r = await call('run', { shell: 'echo in-rootfs; test -e /usr/bin/node || echo no-node' })
      assert.equal(r.isError, undefined, text(r))
      assert.equal(result(r).stdout, 'in-rootfs\nno-node\n')
      // The host's own tree is not there: the program is not found.
      const host = await call('run', { cmd: ['node', '-e', '1'] })
      assert.equal(result(host).status, 'not-found', text(host))
    } finally {
      await client.close()
    }
  })

  it('refuses at start a --rootfs DIR that is not a root filesystem, naming the flag (exit 125)', () => {
    const empty = tempDir('cordon-mcp-norootfs-', { mode: 0o755 })
    const out = spawnSync(process.execPath, [CLI, 'mcp', '--rootfs', empty], {
      encoding: 'utf8',
      input: '',
      env: { ...process.env, TMPDIR: tempDir('cordon-mcp-tmp-') },
    })
    assert.equal(out.status, 125, out.stderr)
    assert.match(out.stderr, new RegExp(`^cordon: --rootfs: ${empty} is not a root filesystem`, 'm'))
    assert.equal(out.stdout, '')
  })
})
