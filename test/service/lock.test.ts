// One service per data dir: the lock is the kernel's (SQLite's record lock), let go when its holder ends.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import path from 'node:path'
import { describe, it } from 'node:test'
import { lockDataDir } from '../../src/service/lock.js'
import { createService } from '../../src/service/service.js'
import { ServiceError } from '../../src/service/types.js'
import { tempDir } from '../helpers.js'

const inUse = (dir: string) => (error: unknown) =>
  error instanceof ServiceError && error.code === 'conflict' && error.message.includes(dir)

describe('the data dir lock', () => {
  it('refuses a second service on one data dir until the first is closed', async () => {
    const dir = path.join(tempDir('cordon-lock-'), 'data')
    const first = await createService({ dataDir: dir, useSpawner: false })
    await assert.rejects(createService({ dataDir: dir, useSpawner: false }), inUse(dir))
    await first.service.close()
    const again = await createService({ dataDir: dir, useSpawner: false })
    await again.service.close()
  })

  it('is let go by the kernel when its holder is SIGKILLed', async () => {
    const dir = tempDir('cordon-lock-')
    const lockUrl = new URL('../../src/service/lock.ts', import.meta.url).href
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `const { lockDataDir } = await import(${JSON.stringify(lockUrl)}); lockDataDir(${JSON.stringify(dir)}); console.log('locked'); setInterval(() => {}, 1000)`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    )
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => b.includes('locked') && resolve())
      child.once('exit', (code) => reject(new Error(`child exited ${code}`)))
    })
    assert.throws(() => lockDataDir(dir), inUse(dir))
    child.kill('SIGKILL')
    await new Promise((r) => child.once('exit', r))
    lockDataDir(dir).release()
  })
})
