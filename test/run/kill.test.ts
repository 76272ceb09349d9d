// Which processes belong to a sandbox, and when that list can stop being read.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { describe, it } from 'node:test'
import { probeCapabilities } from '../../src/host/capabilities.js'
import { SandboxCgroup } from '../../src/host/cgroup.js'
import { cgroupDirs, sandboxCgroupName } from '../../src/host/cgroups.js'
import { cgroupProcesses } from '../../src/run/kill.js'

const support = probeCapabilities().cgroup
const noCgroup = support.version === null ? `no usable cgroup: ${support.reason}` : false

describe('cgroupProcesses', { skip: noCgroup }, () => {
  it('reads the member list until the leader is gone and the cgroup empty, then no more', async () => {
    if (support.version === null) return
    const cgroup = SandboxCgroup.create(support, [], cgroupDirs(support, sandboxCgroupName()))
    let reads = 0
    const counted = {
      members: () => {
        reads++
        return cgroup.members()
      },
      kill: () => cgroup.kill(),
    }
    const leader = spawn('sleep', ['0.3'])
    let gone = false
    leader.on('exit', () => {
      gone = true
    })
    try {
      const procs = cgroupProcesses(counted, { term: () => false, kill() {}, survivors: () => [] }, false, {
        pid: leader.pid!,
        gone: () => gone,
        signal: (sig) => leader.kill(sig),
      })
      assert.deepEqual(procs.survivors(), [])
      assert.deepEqual(procs.survivors(), [])
      assert.equal(reads, 2, 'read while the leader lives: something may still join')
      await once(leader, 'exit')
      procs.kill()
      assert.deepEqual(procs.survivors(), [])
      procs.kill()
      assert.equal(reads, 3, 'one read after the leader is gone, then the empty list is final')
    } finally {
      leader.kill('SIGKILL')
      await cgroup.remove()
    }
  })
})
