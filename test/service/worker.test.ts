import assert from 'node:assert/strict'
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { errorResult, type RunResult } from '../../src/index.js'
import type { RunRequest } from '../../src/service/request.js'
import { runRequestSchema } from '../../src/service/request.js'
import type { KeyRecord, RunEvent, RunEventType } from '../../src/service/types.js'
import {
  dataDirGuard,
  executeRun,
  MAX_LOG_EVENTS,
  TextOfChunks,
  writeFiles,
} from '../../src/service/worker.js'
import { Workspaces } from '../../src/service/workspace.js'
import { noNamespace, tempDir } from '../helpers.js'

const files = (list: unknown[]) => runRequestSchema.parse({ cmd: ['true'], files: list }).files

const key: KeyRecord = {
  id: 'k',
  name: 'k',
  hash: 'h',
  scopes: ['runs:write', 'runs:read'],
  ceilings: {},
  quota: { concurrentRuns: null, runsPerMinute: null },
  secrets: { API_TOKEN: 'tok-123456' },
  retentionMs: null,
  webhookSecret: '',
  createdAt: '2026-01-01T00:00:00.000Z',
  revokedAt: null,
}

/** The workspaces of a data dir made for one test, closed (its slots unmounted) after the file. */
const opened: Workspaces[] = []
after(async () => {
  for (const w of opened) await w.close()
})
async function workspacesOf(dataDir: string, maxBytes = 64 * 1024 * 1024): Promise<Workspaces> {
  const w = await Workspaces.open({ dataDir, maxBytes })
  opened.push(w)
  return w
}

describe('worker', () => {
  it('writes files (text, base64, modes, subdirectories) writable by the sandbox', () => {
    const ws = tempDir('cordon-ws-', { mode: 0o777 })
    writeFiles(
      ws,
      files([
        { path: 'a.txt', content: 'hello' },
        { path: 'sub/dir/b.bin', content: Buffer.from([0, 255, 1]).toString('base64'), encoding: 'base64' },
        { path: 'run.sh', content: '#!/bin/sh\necho hi\n', mode: 0o755 },
      ]),
    )
    assert.equal(readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello')
    assert.deepEqual([...readFileSync(path.join(ws, 'sub/dir/b.bin'))], [0, 255, 1])
    assert.equal(statSync(path.join(ws, 'run.sh')).mode & 0o777, 0o755)
    assert.equal(statSync(path.join(ws, 'a.txt')).mode & 0o777, 0o666)
    assert.equal(statSync(path.join(ws, 'sub')).mode & 0o777, 0o777)
  })

  it('refuses to write through a symlink, file or directory', () => {
    const ws = tempDir('cordon-ws-')
    const outside = tempDir('cordon-outside-')
    symlinkSync(path.join(outside, 'x'), path.join(ws, 'link'))
    symlinkSync(outside, path.join(ws, 'dirlink'))
    assert.throws(() => writeFiles(ws, files([{ path: 'link', content: 'x' }])), /ELOOP/)
    assert.throws(() => writeFiles(ws, files([{ path: 'dirlink/y', content: 'x' }])), /not a directory/)
    assert.equal(existsSync(path.join(outside, 'x')), false)
    assert.equal(existsSync(path.join(outside, 'y')), false)
  })

  it('runs a request in a fresh workspace with secrets injected and redacted, then removes it', {
    skip: noNamespace,
  }, async () => {
    const dataDir = tempDir('cordon-data-')
    const request: RunRequest = runRequestSchema.parse({
      cmd: ['sh', '-c', 'cat in.txt; echo "token=$API_TOKEN"; pwd; echo made > out.txt; cat'],
      files: [{ path: 'in.txt', content: 'input\n' }],
      collect: ['out.txt'],
      stdin: { base64: Buffer.from('from stdin\n').toString('base64') },
    })
    const events: RunEvent[] = []
    let seq = 0
    const result = await executeRun({
      dataDir,
      runId: 'run_w',
      request,
      key,
      spawner: undefined,
      signal: new AbortController().signal,
      stdin: undefined,
      emit: (type: RunEventType, data) => {
        const e = { runId: 'run_w', seq: ++seq, type, at: '', data }
        events.push(e)
        return e
      },
      maxCollectBytes: 1024,
      workspaces: await workspacesOf(dataDir),
    })
    assert.equal(result.status, 'ok', result.violation?.message)
    const [input, token, ws, stdin] = result.stdout.split('\n')
    assert.deepEqual([input, token, stdin], ['input', 'token=[REDACTED]', 'from stdin'])
    assert.ok(ws?.startsWith(path.join(dataDir, 'work', '')) && ws.endsWith('/run_w'), ws)
    assert.equal(existsSync(ws as string), false, 'the workspace is removed')
    assert.equal(readFileSync(path.join(dataDir, 'files/run_w/out.txt'), 'utf8'), 'made\n')
    assert.equal(events[0]?.type, 'started')
    const out = Buffer.concat(
      events.filter((e) => e.type === 'output').map((e) => Buffer.from(String(e.data.data), 'base64')),
    )
    assert.equal(out.toString(), result.stdout)
    assert.ok(!JSON.stringify(events).includes('tok-123456'))
  })

  // The engine hides a variable whose name looks secret from the output; the worker's own byte redactor
  // for collected files knew only the key's secrets and the request's `redact`, and kept it whole.
  it('redacts collected files as the output: secret-named variables of the request too', {
    skip: noNamespace,
  }, async () => {
    const dataDir = tempDir('cordon-data-')
    const result = await executeRun({
      dataDir,
      runId: 'run_env',
      request: runRequestSchema.parse({
        cmd: ['sh', '-c', 'echo "pw=$DB_PASSWORD"; echo "pw=$DB_PASSWORD key=$API_TOKEN" > out.txt'],
        collect: ['out.txt'],
        options: { env: { DB_PASSWORD: 'hunter2-long' } },
      }),
      key,
      spawner: undefined,
      signal: new AbortController().signal,
      stdin: undefined,
      emit: (type: RunEventType, data) => ({ runId: 'run_env', seq: 1, type, at: '', data }),
      maxCollectBytes: 1024,
      workspaces: await workspacesOf(dataDir),
    })
    assert.equal(result.stdout, 'pw=[REDACTED]\n')
    assert.equal(
      readFileSync(path.join(dataDir, 'files/run_env/out.txt'), 'utf8'),
      'pw=[REDACTED] key=[REDACTED]\n',
    )
  })

  it('sends at most MAX_LOG_EVENTS log lines as events, then says the rest are in the result', {
    skip: noNamespace,
  }, async () => {
    // One stored row a line made ~115 bytes of database per byte of tiny lines (30 MB for 256 KiB).
    const events: RunEvent[] = []
    let seq = 0
    const dataDir = tempDir('cordon-data-')
    const result = await executeRun({
      dataDir,
      runId: 'run_l',
      request: runRequestSchema.parse({
        cmd: ['sh', '-c', 'i=0; while [ $i -lt 3000 ]; do echo "l$i"; i=$((i+1)); done >&$CORDON_LOG_FD'],
      }),
      key,
      spawner: undefined,
      signal: new AbortController().signal,
      stdin: undefined,
      emit: (type: RunEventType, data) => {
        const e = { runId: 'run_l', seq: ++seq, type, at: '', data }
        events.push(e)
        return e
      },
      maxCollectBytes: 0,
      workspaces: await workspacesOf(dataDir),
    })
    assert.equal(result.status, 'ok', result.violation?.message)
    assert.equal(result.logs.length, 3000, 'the result keeps every line (within maxLogBytes)')
    const logs = events.filter((e) => e.type === 'log')
    assert.equal(logs.length, MAX_LOG_EVENTS + 1)
    assert.equal(logs[MAX_LOG_EVENTS - 1]?.data.msg, `l${MAX_LOG_EVENTS - 1}`)
    assert.match(String(logs.at(-1)?.data.msg), /the rest are in the result/)
    assert.equal(logs.at(-1)?.data.source, 'cordon')
  })

  // What the sandbox left in its workspace is untrusted: removing it unlinks each symlink it planted (to a
  // directory outside, a file outside, one where a directory was, a loop) and follows none.
  it('removes the workspace without following a symlink the sandbox planted', {
    skip: noNamespace,
  }, async () => {
    const dataDir = tempDir('cordon-data-')
    const outside = tempDir('cordon-outside-', { mode: 0o755 })
    mkdirSync(path.join(outside, 'dir'))
    writeFileSync(path.join(outside, 'precious'), 'keep me\n')
    writeFileSync(path.join(outside, 'dir', 'inner'), 'me too\n')
    const script = [
      'mkdir -p keep/deep swap/inner nest/a && echo x > keep/deep/f && echo y > swap/inner/g',
      `ln -s ${outside} to-dir && ln -s ${outside}/precious to-file && ln -s ${outside}/dir nest/a/link`,
      `mv swap swap.old && ln -s ${outside} swap && ln -s .. nest/up && ln -s loop loop`,
      'chmod 000 keep/deep && chmod 500 nest',
    ].join('; ')
    const result = await executeRun({
      dataDir,
      runId: 'run_links',
      request: runRequestSchema.parse({ cmd: ['sh', '-c', script] }),
      key,
      spawner: undefined,
      signal: new AbortController().signal,
      stdin: undefined,
      emit: (type: RunEventType, data) => ({ runId: 'run_links', seq: 1, type, at: '', data }),
      maxCollectBytes: 0,
      workspaces: await workspacesOf(dataDir),
    })
    assert.equal(result.status, 'ok', JSON.stringify(result))
    assert.deepEqual(
      readdirSync(path.join(dataDir, 'work')).filter((n) => n.includes('run_links')),
      [],
    )
    assert.equal(readFileSync(path.join(outside, 'precious'), 'utf8'), 'keep me\n')
    assert.equal(readFileSync(path.join(outside, 'dir', 'inner'), 'utf8'), 'me too\n')
    assert.deepEqual(readdirSync(outside).sort(), ['dir', 'precious'])
  })

  it('an invalid option or a bad file is the run’s error result, not an exception', async () => {
    const dataDir = tempDir('cordon-data-')
    const base = {
      dataDir,
      runId: 'run_x',
      key,
      spawner: undefined,
      signal: new AbortController().signal,
      stdin: undefined,
      emit: (type: RunEventType, data: Record<string, unknown>) => ({
        runId: 'x',
        seq: 1,
        type,
        at: '',
        data,
      }),
      maxCollectBytes: 0,
      workspaces: await workspacesOf(dataDir),
    }
    const bad = await executeRun({
      ...base,
      request: runRequestSchema.parse({
        cmd: ['true'],
        files: [
          { path: 'a', content: '' },
          { path: 'a/b', content: '' },
        ],
      }),
    })
    assert.equal(bad.status, 'error')
    assert.equal(bad.violation?.limit, 'files')
  })
})

describe('the data dir, kept from sandboxes', () => {
  // Not as root a sandbox has the server's uid, and the data dir (every key's secrets, the other runs'
  // workspaces) its permissions cannot keep from it: the namespace tier hides it, the process tier cannot.
  it('not as root: the namespace tier, with the data dir hidden; the process tier refused', () => {
    assert.deepEqual(dataDirGuard('auto', '/srv/cordon', false), {
      isolation: 'namespace',
      hide: ['/srv/cordon'],
    })
    assert.deepEqual(dataDirGuard('namespace', '/srv/cordon', false), {
      isolation: 'namespace',
      hide: ['/srv/cordon'],
    })
    assert.match(
      (dataDirGuard('process', '/srv/cordon', false) as { refused: string }).refused,
      /run cordon serve as root/,
    )
  })

  it("as root: nothing to add (root's 0700 keeps pool uids out)", () => {
    assert.deepEqual(dataDirGuard('process', '/srv/cordon', true), {})
  })
})

describe('TextOfChunks', () => {
  const bytesResult = (stdout: string, stderr: string, output: string) =>
    ({
      ...errorResult('x', 'y'),
      stdout: Buffer.from(stdout),
      stderr: Buffer.from(stderr),
      output: Buffer.from(output),
    }) as unknown as RunResult<Buffer>

  it('rebuilds output from where the streams took turns, a character cut across turns whole', () => {
    const text = new TextOfChunks()
    const euro = Buffer.from('€')
    // stdout: "a" + the first byte of €, stderr "b", stdout the rest of € + "c", stderr "d".
    const output = Buffer.concat([
      Buffer.from('a'),
      euro.subarray(0, 1),
      Buffer.from('b'),
      euro.subarray(1),
      Buffer.from('cd'),
    ])
    for (const [stream, n] of [
      ['stdout', 2],
      ['stderr', 1],
      ['stdout', 0],
      ['stdout', 3],
      ['stderr', 1],
    ] as const)
      text.push(stream, n)
    const result = text.result({ ...bytesResult('a€c', 'bd', ''), output } as RunResult<Buffer>)
    assert.equal(result.stdout, 'a€c')
    assert.equal(result.stderr, 'bd')
    assert.equal(result.output, 'ab€cd')
  })

  // A program that switches streams at every write makes a turn per read, up to the output cap: each
  // turn was a [stream, bytes] pair (~74 bytes of heap), held for the whole run.
  it('holds a few bytes a turn: a million switches of stream', () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    gc()
    const before = process.memoryUsage().heapUsed
    const text = new TextOfChunks()
    const turns = 1_000_000
    for (let i = 0; i < turns; i++) text.push(i % 2 === 0 ? 'stdout' : 'stderr', 1)
    gc()
    const grown = process.memoryUsage().heapUsed - before
    assert.ok(grown < 24 * turns, `${(grown / turns).toFixed(1)} bytes a turn`)
    const out = 'ab'.repeat(turns / 2)
    const result = text.result(bytesResult('a'.repeat(turns / 2), 'b'.repeat(turns / 2), out))
    assert.equal(result.output, out)
  })
})
