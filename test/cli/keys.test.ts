// `cordon keys create` takes everything POST /v1/keys takes, as flags or as the body itself (--body), and
// the one key schema validates both: the same body gives the same key.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { CEILING_FLAGS, KeyFlagError, keyCreateBody } from '../../src/cli/keys.js'
import { newKeyRecord } from '../../src/service/key-schema.js'
import { startServe, tempDir } from '../helpers.js'

const CLI = fileURLToPath(new URL('../../dist/cli/bin.cjs', import.meta.url))

const keys = (
  dir: string,
  args: string[],
  { env = {}, input }: { env?: NodeJS.ProcessEnv; input?: string } = {},
) =>
  spawnSync(process.execPath, [CLI, 'keys', ...args, '--data-dir', dir], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, ...env },
    ...(input !== undefined ? { input } : {}),
  })

const ALL_FLAGS = [
  'create',
  '--name',
  'grader',
  '--scopes',
  'runs:write,runs:read',
  '--max-timeout',
  '10s',
  '--max-memory',
  '256M',
  '--max-output',
  '1M',
  '--max-procs',
  '32',
  '--network',
  'none',
  '--isolation',
  'namespace',
  '--rootfs',
  'bookworm',
  '--rootfs',
  'trixie',
  '--concurrent-runs',
  '4',
  '--runs-per-minute',
  '60',
  '--secret',
  'PLAIN=one=1',
  '--secret-from-env',
  'API_TOKEN',
  '--retention',
  '30d',
  '--json',
]

describe('cordon keys create', { timeout: 120_000 }, () => {
  it('names each ceiling after the run flag it bounds', () => {
    const flags = Object.fromEntries(CEILING_FLAGS.map((c) => [c.flag, c.limit]))
    assert.equal(flags['max-timeout'], 'wallTimeMs')
    assert.equal(flags['max-memory'], 'memoryBytes')
    assert.equal(flags['max-output'], 'maxOutputBytes')
    assert.equal(flags['max-procs'], 'maxProcesses')
    assert.equal(flags['max-cpu-time'], 'cpuTimeMs')
  })

  it('maps the flags onto the POST /v1/keys body, and the key schema reads it as the HTTP body', () => {
    const body = keyCreateBody(
      {
        name: 'grader',
        maxTimeout: '10s',
        maxMemory: '256M',
        maxProcs: '32',
        network: 'none,allow',
        isolation: 'namespace',
        rootfs: ['bookworm'],
        concurrentRuns: 4,
        runsPerMinute: 60,
        secret: ['PLAIN=a=b'],
        secretFromEnv: ['API_TOKEN'],
        retention: '30d',
      },
      { API_TOKEN: 'tok' },
    )
    const http = {
      name: 'grader',
      scopes: ['runs:write', 'runs:read'],
      ceilings: {
        limits: { wallTimeMs: '10s', memoryBytes: '256M', maxProcesses: 32 },
        network: ['none', 'allow'],
        isolation: 'namespace',
        rootfs: ['bookworm'],
      },
      quota: { concurrentRuns: 4, runsPerMinute: 60 },
      secrets: { PLAIN: 'a=b', API_TOKEN: 'tok' },
      retention: '30d',
    }
    assert.deepEqual(body, http)
    const strip = ({ record }: ReturnType<typeof newKeyRecord>) => ({
      ...record,
      id: '',
      hash: '',
      webhookSecret: '',
    })
    const now = new Date(0)
    assert.deepEqual(strip(newKeyRecord(body, now)), strip(newKeyRecord(http, now)))
  })

  it('refuses a bare number for a duration or size, a bad secret, and an unset --secret-from-env', () => {
    const refused = (values: Record<string, unknown>, flag: string) =>
      assert.throws(
        () => keyCreateBody({ name: 'k', ...values }, {}),
        (e: unknown) => e instanceof KeyFlagError && e.flag === flag,
      )
    refused({ maxTimeout: '10' }, '--max-timeout')
    refused({ maxMemory: '256' }, '--max-memory')
    refused({ secret: ['NOVALUE'] }, '--secret')
    refused({ secretFromEnv: ['NOT_SET_HERE'] }, '--secret-from-env')
  })

  it('creates a key with every flag, the secret from the environment', () => {
    const dir = tempDir('cordon-keys-')
    const made = keys(dir, ALL_FLAGS, { env: { API_TOKEN: 'from-the-env' } })
    assert.equal(made.status, 0, made.stderr)
    const key = JSON.parse(made.stdout) as Record<string, unknown>
    assert.deepEqual(
      {
        name: key.name,
        scopes: key.scopes,
        ceilings: key.ceilings,
        quota: key.quota,
        secrets: key.secrets,
        retentionMs: key.retentionMs,
      },
      {
        name: 'grader',
        scopes: ['runs:write', 'runs:read'],
        ceilings: {
          limits: {
            wallTimeMs: 10_000,
            memoryBytes: 256 * 1024 * 1024,
            maxOutputBytes: 1024 * 1024,
            maxProcesses: 32,
          },
          network: 'none',
          isolation: 'namespace',
          rootfs: ['bookworm', 'trixie'],
        },
        quota: { concurrentRuns: 4, runsPerMinute: 60 },
        secrets: ['PLAIN', 'API_TOKEN'],
        retentionMs: 30 * 86_400_000,
      },
    )
    assert.doesNotMatch(made.stdout, /from-the-env/, 'a secret value is never shown')
  })

  it('--body takes the exact POST /v1/keys body (- for stdin); flags win over it', () => {
    const dir = tempDir('cordon-keys-')
    const body = {
      name: 'from-body',
      scopes: ['runs:read'],
      ceilings: { limits: { wallTimeMs: '5s' }, network: 'none' },
      quota: { concurrentRuns: 2, runsPerMinute: null },
      retention: '12h',
    }
    const made = keys(dir, ['create', '--body', '-', '--max-memory', '64M', '--json'], {
      input: JSON.stringify(body),
    })
    assert.equal(made.status, 0, made.stderr)
    const key = JSON.parse(made.stdout) as Record<string, unknown>
    assert.equal(key.name, 'from-body')
    assert.deepEqual(key.scopes, ['runs:read'])
    assert.deepEqual(key.ceilings, {
      limits: { wallTimeMs: 5000, memoryBytes: 64 * 1024 * 1024 },
      network: 'none',
    })
    assert.deepEqual(key.quota, { concurrentRuns: 2, runsPerMinute: null })
    assert.equal(key.retentionMs, 12 * 3_600_000)
  })

  it('says a refusal in one line naming the flag, exit 125', () => {
    const dir = tempDir('cordon-keys-')
    const said = (args: string[], pattern: RegExp, input?: string) => {
      const r = keys(dir, ['create', ...args], input === undefined ? {} : { input })
      assert.equal(r.status, 125, r.stderr)
      assert.match(r.stderr, pattern)
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    }
    said(['--name', 'k', '--max-timeout', '10'], /^cordon: --max-timeout: "10" needs a unit/)
    said(['--name', 'k', '--max-memory', 'lots'], /^cordon: --max-memory: /)
    said(['--name', 'k', '--isolation', 'vm'], /^cordon: --isolation: /)
    said(['--name', 'k', '--retention', 'forever'], /^cordon: --retention: /)
    said(
      ['--name', 'k', '--secret-from-env', 'CORDON_TEST_UNSET_XYZ'],
      /^cordon: --secret-from-env: CORDON_TEST_UNSET_XYZ/,
    )
    said(['--name', 'k', '--concurrent-runs', '0'], /--concurrent-runs/)
    said(['--scopes', 'runs:read'], /^cordon: --name: /)
    said(['--body', '-'], /^cordon: --body: /, '{"name": "k", "ceilings": {"bogus": 1}}')
    said(['--body', '-'], /^cordon: --body: /, 'not json')
  })

  it('a ceiling set by the CLI on a running server’s data dir bounds that server’s runs', async () => {
    const dir = tempDir('cordon-keys-')
    const s = await startServe(dir)
    try {
      const made = keys(dir, ['create', '--name', 'brief', '--max-timeout', '1s', '--json'])
      assert.equal(made.status, 0, made.stderr)
      const { key } = JSON.parse(made.stdout) as { key: string }
      const res = await fetch(`${s.url}/v1/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        body: JSON.stringify({ cmd: ['true'], options: { limits: { wallTimeMs: '5s' } } }),
      })
      assert.equal(res.status, 403)
      const { error } = (await res.json()) as { error: { code: string; field: string } }
      assert.equal(error.code, 'over-ceiling')
      assert.equal(error.field, 'options.limits.wallTimeMs')
    } finally {
      s.child.kill('SIGTERM')
      assert.equal(await s.exited, 0)
    }
  })
})
