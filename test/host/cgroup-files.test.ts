import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  cgroupWrites,
  cpuUsageMs,
  memoryLimit,
  parseFlatKeyed,
  parseUsage,
  pidsLimit,
  usageFiles,
} from '../../src/host/cgroup-files.js'
import { cgroupSupport, parseOwnCgroups } from '../../src/host/cgroups.js'
import { parsePolicy } from '../../src/policy/schema.js'

const limits = parsePolicy({ limits: { memoryBytes: '128M', maxProcesses: 10 } }).limits

describe('cgroup writes', () => {
  it('v2: memory.max, no swap, OOM kills the group, pids.max with the tier overhead', () => {
    assert.deepEqual(cgroupWrites(2, limits, 1), [
      { controller: 'unified', file: 'memory.max', value: String(128 * 1024 * 1024) },
      { controller: 'unified', file: 'memory.swap.max', value: '0' },
      { controller: 'unified', file: 'memory.oom.group', value: '1' },
      { controller: 'unified', file: 'pids.max', value: '11' },
    ])
  })

  it('v1: limit_in_bytes before memsw (which must not be lower), swappiness 0, TCP buffers capped, pids.max', () => {
    assert.deepEqual(cgroupWrites(1, limits, 0), [
      { controller: 'memory', file: 'memory.limit_in_bytes', value: String(128 * 1024 * 1024) },
      { controller: 'memory', file: 'memory.memsw.limit_in_bytes', value: String(128 * 1024 * 1024) },
      { controller: 'memory', file: 'memory.swappiness', value: '0' },
      // v1 charges TCP buffers only once this is set, to a counter of their own beside the memory limit.
      { controller: 'memory', file: 'memory.kmem.tcp.limit_in_bytes', value: String(128 * 1024 * 1024) },
      { controller: 'pids', file: 'pids.max', value: '10' },
    ])
  })

  it('v2 needs no socket write: memory.max charges socket buffers already', () => {
    assert.ok(!cgroupWrites(2, limits, 0).some((w) => /tcp|sock|kmem/.test(w.file)))
  })
})

describe('memoryLimit', () => {
  it('v1 writes limit_in_bytes before memsw; v2 memory.max', () => {
    assert.deepEqual(
      memoryLimit(1, 4096).map((w) => w.file),
      ['memory.limit_in_bytes', 'memory.memsw.limit_in_bytes'],
    )
    assert.deepEqual(memoryLimit(2, 4096), [{ controller: 'unified', file: 'memory.max', value: '4096' }])
  })
})

describe('pidsLimit', () => {
  it("is the pids.max write alone, in the version's own directory", () => {
    assert.deepEqual(pidsLimit(1, limits, 3), { controller: 'pids', file: 'pids.max', value: '13' })
    assert.deepEqual(pidsLimit(2, limits, 0), { controller: 'unified', file: 'pids.max', value: '10' })
  })
})

describe('parseOwnCgroups', () => {
  it('maps each v1 controller (comma-joined ones too) and v2 to its path', () => {
    const text = '9:name=systemd:/\n4:memory:/a/b\n2:cpu,cpuacct:/c\n0::/d\n'
    assert.deepEqual(parseOwnCgroups(text), {
      'name=systemd': '/',
      memory: '/a/b',
      cpu: '/c',
      cpuacct: '/c',
      '': '/d',
    })
  })
})

describe('cgroup counters', () => {
  it('parses flat keyed files and ignores junk', () => {
    assert.deepEqual(parseFlatKeyed('low 0\nhigh 3\noom_kill 2\nbad x\n\n'), { low: 0, high: 3, oom_kill: 2 })
  })

  it('v2 usage: cpu.stat usage_usec, memory.peak, memory.events oom_kill, pids.events max', () => {
    assert.deepEqual(
      usageFiles(2).map((f) => f.file),
      ['cpu.stat', 'memory.peak', 'memory.events', 'pids.events'],
    )
    const usage = parseUsage(2, {
      'cpu.stat': 'usage_usec 1234567\nuser_usec 1000000\n',
      'memory.peak': '104857600\n',
      'memory.events': 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n',
      'pids.events': 'max 4\n',
    })
    assert.deepEqual(usage, { cpuMs: 1235, maxRssBytes: 104857600, oomKills: 1, pidsMaxHits: 4 })
  })

  it('v1 usage: cpuacct.usage ns, max_usage_in_bytes, oom_control oom_kill', () => {
    const usage = parseUsage(1, {
      'cpuacct.usage': '2500000000\n',
      'memory.max_usage_in_bytes': '5000\n',
      'memory.oom_control': 'oom_kill_disable 0\nunder_oom 0\noom_kill 3\n',
      'pids.events': 'max 0\n',
    })
    assert.deepEqual(usage, { cpuMs: 2500, maxRssBytes: 5000, oomKills: 3, pidsMaxHits: 0 })
  })

  it('missing files (an older kernel without memory.peak) give null figures, not errors', () => {
    assert.deepEqual(parseUsage(2, {}), { cpuMs: null, maxRssBytes: null, oomKills: 0, pidsMaxHits: 0 })
  })

  it('reads the polled CPU figure for both versions', () => {
    assert.equal(cpuUsageMs(2, 'usage_usec 1500\n'), 1.5)
    assert.equal(cpuUsageMs(1, '3000000\n'), 3)
    assert.equal(cpuUsageMs(1, ''), null)
  })
})

describe('cgroupSupport', () => {
  it('says why when no cgroup filesystem is mounted', () => {
    const s = cgroupSupport({ v2: null, v1: {}, own: {}, favordynmods: false })
    assert.deepEqual(s, { version: null, reason: 'no cgroup filesystem is mounted' })
  })

  it('refuses a v2 hierarchy without memory and pids, and names what v1 lacks', () => {
    const s = cgroupSupport({
      v2: { mount: '/nonexistent/cgroup2', controllers: [] },
      v1: { memory: '/nonexistent/memory' },
      own: { '': '/' },
      favordynmods: false,
    })
    assert.equal(s.version, null)
    assert.match(
      s.version === null ? s.reason : '',
      /v2 at \/nonexistent\/cgroup2 lacks memory, pids; v1 lacks pids, cpuacct$/,
    )
  })

  it('refuses v1 parents that are not writable, naming them', () => {
    const v1 = { memory: '/proc/none', pids: '/proc/none', cpuacct: '/proc/none' }
    const s = cgroupSupport({ v2: null, v1, own: {}, favordynmods: false }, '/x')
    assert.equal(s.version, null)
    assert.match(s.version === null ? s.reason : '', /\/proc\/none\/x.* not writable/)
  })
})
