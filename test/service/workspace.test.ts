// A run's workspace is bounded in size (as root a tmpfs of its own, otherwise measured as the run runs),
// and goes without a walk any sandbox could steer.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statfsSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import type { RunResult } from '../../src/index.js'
import { runRequestSchema } from '../../src/service/request.js'
import { createService } from '../../src/service/service.js'
import type { KeyRecord, RunEventType } from '../../src/service/types.js'
import { executeRun } from '../../src/service/worker.js'
import { mountsUnder, Workspaces } from '../../src/service/workspace.js'
import { noNamespace, notRoot, tempDir } from '../helpers.js'

const MiB = 1024 * 1024

const key: KeyRecord = {
  id: 'k',
  name: 'k',
  hash: 'h',
  scopes: ['runs:write', 'runs:read'],
  ceilings: {},
  quota: { concurrentRuns: null, runsPerMinute: null },
  secrets: {},
  retentionMs: null,
  webhookSecret: '',
  createdAt: '2026-01-01T00:00:00.000Z',
  revokedAt: null,
}

const opened: Workspaces[] = []
const closers: (() => Promise<void>)[] = []
after(async () => {
  for (const c of closers) await c()
  for (const w of opened) await w.close()
})

async function open(dataDir: string, maxBytes: number, mount?: boolean): Promise<Workspaces> {
  const w = await Workspaces.open({ dataDir, maxBytes, ...(mount !== undefined ? { mount } : {}) })
  opened.push(w)
  return w
}

/** One run of `script` (sh -c) through the worker, in a workspace of `workspaces`. */
function runScript(
  workspaces: Workspaces,
  dataDir: string,
  script: string,
  options: Record<string, unknown> = {},
): Promise<RunResult> {
  return executeRun({
    dataDir,
    runId: `run_${Math.random().toString(36).slice(2)}`,
    request: runRequestSchema.parse({ cmd: ['sh', '-c', script], options }),
    key,
    spawner: undefined,
    signal: new AbortController().signal,
    stdin: undefined,
    emit: (type: RunEventType, data) => ({ runId: 'r', seq: 1, type, at: '', data }),
    maxCollectBytes: 0,
    workspaces,
  })
}

// A run wrote as much as its wall time let it into its workspace, on the data dir's filesystem: that
// filled, every other tenant's submission failed (500) until the run ended.
describe('as root: a tmpfs of --max-workspace', { skip: notRoot || noNamespace }, () => {
  it('bounds what a run writes: past it is ENOSPC, the data dir untouched', async () => {
    const dataDir = path.join(tempDir('cordon-ws-svc-'), 'data')
    const made = await createService({
      dataDir,
      concurrency: 1,
      useSpawner: false,
      maxWorkspaceBytes: 4 * MiB,
    })
    closers.push(() => made.service.close())
    const { service } = made
    const admin = service.authenticate(made.adminKey as string) as KeyRecord
    const { key: token } = service.createKey(admin, {
      name: 'u',
      scopes: ['runs:write', 'runs:read'],
      ceilings: {},
    })
    const user = service.authenticate(token) as KeyRecord
    const freeBefore = statfsSync(dataDir).bavail * statfsSync(dataDir).bsize
    const run = service.submit(user, {
      cmd: ['sh', '-c', 'head -c 16777216 /dev/zero > big; echo "rc=$?"; wc -c < big'],
      options: { limits: { maxFileSizeBytes: '64M', wallTimeMs: '30s' } },
    })
    await service.wait(user, run.id, 30_000)
    const result = service.result(user, run.id) as RunResult
    assert.equal(result.status, 'ok', result.violation?.message)
    const [rc, size] = result.stdout.trim().split('\n')
    assert.equal(rc, 'rc=1')
    assert.ok(Number(size) <= 4 * MiB, `${size} bytes written`)
    assert.match(result.stderr, /No space left on device/)
    // Nothing of it went to the data dir's disk (other processes may write there too: generously).
    assert.ok(freeBefore - statfsSync(dataDir).bavail * statfsSync(dataDir).bsize < 4 * MiB)
  })

  it('charges what a run writes there to its memory limit: the files and the memory share memoryBytes', async () => {
    const dataDir = tempDir('cordon-data-')
    const workspaces = await open(dataDir, 1024 * MiB)
    assert.equal(workspaces.bound, 'tmpfs')
    const result = await runScript(workspaces, dataDir, 'head -c 134217728 /dev/zero > big', {
      limits: { memoryBytes: '32M', maxFileSizeBytes: '1G', wallTimeMs: '30s' },
    })
    assert.equal(result.status, 'memory', JSON.stringify(result.violation))
  })

  it('reuses one tmpfs run after run, each workspace fresh and empty, and unmounts it at close', async () => {
    const dataDir = tempDir('cordon-data-')
    const workspaces = await open(dataDir, 8 * MiB)
    const work = path.join(dataDir, 'work')
    for (let i = 0; i < 3; i++) {
      const result = await runScript(workspaces, dataDir, 'ls -A; echo x > left-$$; mkdir -p d/e')
      assert.equal(result.status, 'ok', result.violation?.message)
      assert.equal(result.stdout, '', 'nothing of the run before')
    }
    assert.equal(mountsUnder(work).length, 1)
    await workspaces.close()
    assert.deepEqual(mountsUnder(work), [])
  })

  it("removes a pool uid's tree nested deeper than any path can name", async () => {
    const dataDir = tempDir('cordon-data-')
    const workspaces = await open(dataDir, 64 * MiB)
    const ws = await workspaces.acquire('run_deep')
    const nest = `
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(2000):
    os.mkdir('d' * 9, dir_fd=fd)
    sub = os.open('d' * 9, os.O_RDONLY, dir_fd=fd)
    os.fchown(sub, 60123, 60000)
    os.close(fd)
    fd = sub
`
    const made = spawnSync('python3', ['-c', nest, ws.dir], { encoding: 'utf8' })
    assert.equal(made.status, 0, made.stderr)
    await ws.release(true)
    assert.equal(existsSync(ws.dir), false)
    const next = await workspaces.acquire('run_next')
    assert.deepEqual(readdirSync(next.dir), [])
    await next.release(true)
  })

  it('at start, unmounts what a dead server left mounted under work/, walking nothing', async () => {
    const dataDir = tempDir('cordon-data-')
    const first = await open(dataDir, 8 * MiB)
    const ws = await first.acquire('run_left')
    writeFileSync(path.join(ws.dir, 'f'), 'x')
    // The server died here: its slot stays mounted. The next one starts.
    const again = await open(dataDir, 8 * MiB)
    assert.equal(mountsUnder(path.join(dataDir, 'work')).length, 1, 'its own slot only')
    assert.deepEqual(readdirSync(path.join(dataDir, 'work')), ['slot-0'])
    await again.close()
  })
})

describe('measured workspaces (not as root, or no mount)', { skip: noNamespace }, () => {
  it('stops a run once its workspace holds more than the quota', async () => {
    const dataDir = tempDir('cordon-data-')
    const workspaces = await open(dataDir, 4 * MiB, false)
    assert.equal(workspaces.bound, 'measured')
    const started = Date.now()
    const result = await runScript(
      workspaces,
      dataDir,
      'i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); sleep 0.05; done',
      { limits: { wallTimeMs: '60s' } },
    )
    assert.equal(result.status, 'file-size', JSON.stringify(result.violation))
    assert.equal(result.violation?.limit, 4 * MiB)
    assert.match(result.violation?.message ?? '', /workspace grew past 4M/)
    assert.ok(Date.now() - started < 30_000)
  })

  it('stops a run that shuts a directory of its workspace from the measure', async () => {
    const dataDir = tempDir('cordon-data-')
    const workspaces = await open(dataDir, 64 * MiB, false)
    const result = await runScript(
      workspaces,
      dataDir,
      'mkdir hid; echo x > hid/f; chmod 000 hid; sleep 20',
      {
        limits: { wallTimeMs: '60s' },
      },
    )
    // As root du reads a shut directory all the same: nothing to stop there.
    if (process.getuid?.() === 0) assert.equal(result.status, 'ok', JSON.stringify(result.violation))
    else assert.match(result.violation?.message ?? '', /could not be measured whole/)
  })

  it('lets a run within its quota be', async () => {
    const dataDir = tempDir('cordon-data-')
    const workspaces = await open(dataDir, 8 * MiB, false)
    const result = await runScript(workspaces, dataDir, 'head -c 1048576 /dev/zero > f; sleep 1; echo ok')
    assert.equal(result.status, 'ok', JSON.stringify(result.violation))
    assert.equal(result.stdout, 'ok\n')
  })
})

// What the sandbox left in its workspace is untrusted: removing it unlinks each symlink it planted (to a
// directory outside, a file outside, one where a directory was, a loop) and follows none, and opens the
// directories it shut.
describe('removing a workspace', () => {
  const modes = [
    ...(notRoot ? [] : [{ name: 'tmpfs', mount: true }]),
    { name: 'measured', mount: false },
  ] as const
  for (const { name, mount } of modes) {
    for (const sandboxGone of [true, false]) {
      it(`follows no link and opens what was shut (${name}${sandboxGone ? ', the sandbox ended' : ''})`, async () => {
        const outside = tempDir('cordon-outside-')
        mkdirSync(path.join(outside, 'dir'))
        writeFileSync(path.join(outside, 'precious'), 'keep me\n')
        writeFileSync(path.join(outside, 'dir', 'inner'), 'me too\n')
        const dataDir = tempDir('cordon-data-')
        const workspaces = await open(dataDir, 16 * MiB, mount)
        const { dir: ws, release } = await workspaces.acquire('run_x')
        mkdirSync(path.join(ws, 'keep', 'deep'), { recursive: true })
        mkdirSync(path.join(ws, 'nest', 'a'), { recursive: true })
        writeFileSync(path.join(ws, 'keep', 'deep', 'f'), 'x')
        symlinkSync(outside, path.join(ws, 'to-dir'))
        symlinkSync(path.join(outside, 'precious'), path.join(ws, 'to-file'))
        symlinkSync(path.join(outside, 'dir'), path.join(ws, 'nest', 'a', 'link'))
        symlinkSync(outside, path.join(ws, 'swap'))
        symlinkSync('..', path.join(ws, 'nest', 'up'))
        chmodSync(path.join(ws, 'keep', 'deep'), 0)
        chmodSync(path.join(ws, 'nest'), 0o500)
        await release(sandboxGone)
        assert.equal(existsSync(ws), false, 'the workspace is gone')
        assert.equal(readFileSync(path.join(outside, 'precious'), 'utf8'), 'keep me\n')
        assert.equal(readFileSync(path.join(outside, 'dir', 'inner'), 'utf8'), 'me too\n')
        assert.deepEqual(readdirSync(outside).sort(), ['dir', 'precious'])
      })
    }
  }

  it('at start, removes what a dead server left without following its links', async () => {
    const outside = tempDir('cordon-outside-')
    writeFileSync(path.join(outside, 'precious'), 'keep me\n')
    const dataDir = tempDir('cordon-data-')
    mkdirSync(path.join(dataDir, 'work', 'run_old', 'd'), { recursive: true })
    symlinkSync(outside, path.join(dataDir, 'work', 'run_old', 'd', 'out'))
    symlinkSync(outside, path.join(dataDir, 'work', 'run_link'))
    const workspaces = await open(dataDir, 8 * MiB, false)
    assert.deepEqual(readdirSync(workspaces.work), [])
    assert.deepEqual(readdirSync(outside), ['precious'])
  })
})
