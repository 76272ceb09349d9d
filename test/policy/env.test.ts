import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { SAFE_PATH } from '../../src/host/programs.js'
import { baseEnv, buildEnv } from '../../src/policy/env.js'

const BASE = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/tmp',
  TMPDIR: '/tmp',
  LANG: 'C.UTF-8',
  LC_ALL: 'C.UTF-8',
  TERM: 'dumb',
}

describe('baseEnv', () => {
  it('is the small clean set', () => {
    assert.deepEqual(baseEnv(), BASE)
    assert.equal(baseEnv().PATH, SAFE_PATH)
  })

  it('returns a fresh object each time', () => {
    const a = baseEnv()
    a.PATH = '/evil'
    assert.equal(baseEnv().PATH, SAFE_PATH)
  })
})

describe('buildEnv', () => {
  const host: NodeJS.ProcessEnv = {
    PATH: '/host/bin',
    HOME: '/root',
    SECRET_TOKEN: 'hunter2',
    FOO: 'foo-from-host',
    EMPTY: '',
  }

  it('leaks nothing from the host without passEnv', () => {
    assert.deepEqual(buildEnv(host, [], {}), BASE)
  })

  it('copies only the named host variables', () => {
    const env = buildEnv(host, ['FOO'], {})
    assert.deepEqual(env, { ...BASE, FOO: 'foo-from-host' })
    assert.equal(Object.hasOwn(env, 'SECRET_TOKEN'), false)
  })

  it('skips named variables the host does not set', () => {
    const env = buildEnv(host, ['FOO', 'NOT_SET_ANYWHERE'], {})
    assert.deepEqual(env, { ...BASE, FOO: 'foo-from-host' })
    assert.equal(Object.hasOwn(env, 'NOT_SET_ANYWHERE'), false)
  })

  it('passes a host variable that is set to the empty string', () => {
    assert.equal(buildEnv(host, ['EMPTY'], {}).EMPTY, '')
  })

  it('lets passEnv replace a base variable', () => {
    assert.equal(buildEnv(host, ['PATH'], {}).PATH, '/host/bin')
  })

  it('lets explicit env override base and passed variables', () => {
    const env = buildEnv(host, ['FOO', 'HOME'], {
      FOO: 'explicit',
      HOME: '/home/sandbox',
      LANG: 'C',
      NEW: '1',
    })
    assert.deepEqual(env, { ...BASE, FOO: 'explicit', HOME: '/home/sandbox', LANG: 'C', NEW: '1' })
  })

  it('does not modify its inputs', () => {
    const hostCopy = { ...host }
    const overrides = { A: '1' }
    buildEnv(host, ['FOO'], overrides)
    assert.deepEqual(host, hostCopy)
    assert.deepEqual(overrides, { A: '1' })
  })
})
