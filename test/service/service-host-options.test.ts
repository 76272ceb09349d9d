// The operator's host paths on an in-process service (ServiceOptions.hostOptions, what `cordon mcp --cwd
// --writable …` sets): validated by the library's schema, set in every run, never a request's.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { createService } from '../../src/service/service.js'
import type { KeyRecord } from '../../src/service/types.js'
import { hostPaths } from '../../src/service/worker.js'
import { noNamespace, tempDir, worldWritableDir } from '../helpers.js'

const closers: (() => Promise<void>)[] = []
after(async () => {
  for (const close of closers.reverse()) await close()
})

async function serviceWith(hostOptions: Record<string, unknown>) {
  const made = await createService({ dataDir: path.join(tempDir('cordon-host-'), 'data'), hostOptions })
  closers.push(() => made.service.close())
  const admin = made.service.authenticate(made.adminKey as string) as KeyRecord
  return { service: made.service, admin }
}

describe('hostOptions', () => {
  it('are validated by the library schema, naming the field', async () => {
    await assert.rejects(serviceWith({ passEnv: ['1BAD'] }), { name: 'PolicyError', field: 'passEnv.0' })
    await assert.rejects(serviceWith({ uidPool: { first: 1 } }), { name: 'PolicyError' })
    await assert.rejects(serviceWith({ cwd: '' }), { name: 'PolicyError', field: 'cwd' })
  })

  it('replace the fresh workspace only when a cwd is given', () => {
    assert.deepEqual(hostPaths({}, '/w', undefined), { cwd: '/w', writable: ['/w'] })
    assert.deepEqual(hostPaths({ writable: ['/p'], passEnv: ['HOME'] }, '/w', ['/data']), {
      cwd: '/w',
      writable: ['/w', '/p'],
      hide: ['/data'],
      passEnv: ['HOME'],
    })
    assert.deepEqual(hostPaths({ cwd: '/p', hide: ['/h'] }, '/w', ['/data']), {
      cwd: '/p',
      writable: [],
      hide: ['/h', '/data'],
    })
  })
})

describe('hostOptions in real runs', { skip: noNamespace }, () => {
  it('without a cwd: the workspace and its files stay, the operator’s writable dir is added', async () => {
    const extra = worldWritableDir('cordon-host-w-')
    const { service, admin } = await serviceWith({ writable: [extra] })
    const run = service.submit(admin, {
      cmd: ['sh', '-c', `cat in.txt > ${extra}/out.txt; pwd`],
      files: [{ path: 'in.txt', content: 'given' }],
    })
    const done = await service.wait(admin, run.id, 20_000)
    assert.equal(done.result?.status, 'ok', JSON.stringify(done.result))
    assert.equal(readFileSync(path.join(extra, 'out.txt'), 'utf8'), 'given')
    assert.match(String(service.result(admin, done.id)?.stdout), /\/work\/(slot-\d+\/)?run_/)
  })

  it('with a cwd: runs start there, and files and collect are refused', async () => {
    const project = worldWritableDir('cordon-host-p-')
    const { service, admin } = await serviceWith({ cwd: project, writable: [project] })
    const run = service.submit(admin, { cmd: ['sh', '-c', 'pwd; echo x > made.txt'] })
    const done = await service.wait(admin, run.id, 20_000)
    assert.equal(String(service.result(admin, done.id)?.stdout).trim(), project)
    assert.ok(existsSync(path.join(project, 'made.txt')))
    for (const field of ['files', 'collect']) {
      const body = { cmd: ['true'], [field]: field === 'files' ? [{ path: 'a', content: 'b' }] : ['a'] }
      assert.throws(() => service.submit(admin, body), {
        name: 'ServiceError',
        code: 'forbidden-option',
        field,
      })
    }
    // A request still cannot name a host path.
    assert.throws(() => service.submit(admin, { cmd: ['true'], options: { cwd: '/' } }), {
      code: 'forbidden-option',
      field: 'options.cwd',
    })
  })
})
