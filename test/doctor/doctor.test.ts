// The doctor's checks that are pure functions of what the machine reports.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  autoChoice,
  openFilesCheck,
  pathsCheck,
  processTierCheck,
  seccompCheck,
  socketMemoryCheck,
} from '../../src/doctor/doctor.js'
import { probeCapabilities } from '../../src/host/capabilities.js'
import { asUnprivileged, noUnprivileged } from '../helpers.js'

describe('socket memory check', () => {
  it('v1: TCP capped by kmem.tcp, unix charged, the unaccepted-connection gap named', () => {
    const c = socketMemoryCheck(1, 'BOOT_IMAGE=/vmlinuz root=/dev/vda1')
    assert.equal(c.ok, true)
    assert.match(c.detail, /memory\.kmem\.tcp\.limit_in_bytes/)
    assert.match(c.detail, /unix socket buffers charged/)
    assert.match(c.detail, /not yet accepted/)
  })

  it('v2: charged to memory.max', () => {
    const c = socketMemoryCheck(2, '')
    assert.equal(c.ok, true)
    assert.match(c.detail, /memory\.max/)
  })

  it('not ok, with a fix, without a cgroup or when the kernel charges no socket (nosocket)', () => {
    for (const c of [
      socketMemoryCheck(null, ''),
      socketMemoryCheck(1, 'quiet cgroup.memory=nokmem,nosocket'),
    ]) {
      assert.equal(c.ok, false)
      assert.ok(c.fix)
    }
    assert.equal(socketMemoryCheck(2, 'cgroup.memory=nokmem').ok, true)
  })
})

describe('seccomp check', () => {
  const caps = probeCapabilities()
  it('names the architecture whose filter every sandbox gets', () => {
    for (const arch of ['x86_64', 'aarch64'] as const) {
      const c = seccompCheck({ ...caps, seccompArch: arch })
      assert.equal(c.ok, true)
      assert.match(c.detail, new RegExp(`^${arch} filter on every sandbox`))
      assert.match(c.detail, arch === 'x86_64' ? /i386 and x32 calls killed/ : /AArch32 calls killed/)
      assert.equal(c.fix, null)
    }
  })

  it('where cordon has none: not ok, denySyscalls refused, and which architectures have one', () => {
    const c = seccompCheck({ ...caps, seccompArch: null })
    assert.equal(c.ok, false)
    assert.match(c.detail, /no filter: cordon builds one for x86_64 and aarch64 only/)
    assert.match(c.detail, /denySyscalls is refused/)
    assert.match(c.fix ?? '', /aarch64/)
  })

  it("this machine's: the architecture of this Node", () => {
    const arch = { x64: 'x86_64', arm64: 'aarch64' }[process.arch as string] ?? null
    assert.equal(caps.seccompArch, arch)
  })
})

describe('open files check', () => {
  it('ok when filling the file table would take more memory than the machine has', () => {
    assert.equal(openFilesCheck(2 ** 63 - 1, 64 * 2 ** 30).ok, true)
    assert.equal(openFilesCheck(1e9, 64 * 2 ** 30).ok, true)
  })

  it("not ok when memory limits could fill it (this machine's 2.4M files of ~0.5 KiB: 1129 MiB)", () => {
    const c = openFilesCheck(2_466_167, 24 * 2 ** 30)
    assert.equal(c.ok, false)
    assert.match(c.detail, /2466167/)
    assert.match(c.detail, /1129 MiB/)
    assert.match(c.fix ?? '', /fs\.file-max/)
  })
})

describe('process tier check', () => {
  const caps = probeCapabilities()
  it("says whose /etc/passwd the sandbox sees: cordon's as root, the host's (its users) otherwise", {
    skip: caps.launcher ? false : 'the launcher is not built',
  }, () => {
    assert.match(
      processTierCheck({ ...caps, isRoot: true }).detail,
      /\/etc\/passwd and \/etc\/group are cordon's/,
    )
    assert.match(
      processTierCheck({ ...caps, isRoot: false, userns: true }).detail,
      /the host's \/etc\/passwd and \/etc\/group \(its users\) stay visible/,
    )
  })

  it('not as root: its TMPDIR a tmpfs in a user namespace of its own, or every run refused without one', {
    skip: caps.launcher ? false : 'the launcher is not built',
  }, () => {
    const bounded = processTierCheck({ ...caps, isRoot: false, userns: true, usernsReason: null })
    assert.equal(bounded.ok, true)
    assert.match(
      bounded.detail,
      /own user and mount namespace .*TMPDIR and \/dev\/shm are tmpfs of tmpfsBytes/,
    )
    const none = processTierCheck({
      ...caps,
      isRoot: false,
      userns: false,
      usernsReason: 'user.max_user_namespaces is 0',
    })
    assert.equal(none.ok, false)
    assert.match(none.detail, /refuses every run \(error, limits\.tmpfsBytes\)/)
    assert.match(none.detail, /user\.max_user_namespaces is 0/)
    assert.match(none.fix ?? '', /allow unprivileged user namespaces/)
    // Allowed by the sysctls, refused all the same (a container's seccomp profile): the probe says so.
    const failed = processTierCheck(
      { ...caps, isRoot: false, userns: true, usernsReason: null },
      { ok: false, detail: 'cordon-launch: unshare: user and mount namespace: Operation not permitted' },
    )
    assert.equal(failed.ok, false)
    assert.match(failed.detail, /its runs fail: .*Operation not permitted/)
  })

  it('as uid 65534, the doctor tries the bounded TMPDIR for real and the process tier is usable', {
    skip: noUnprivileged() || (caps.userns ? false : `no user namespaces: ${caps.usernsReason}`),
  }, async () => {
    const out = await asUnprivileged<{ ok: boolean; detail: string; usable: string[] }>(`
      const { doctor } = await import(${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)})
      const d = doctor()
      const c = d.checks.find((c) => c.name === 'process tier')
      return { ok: c.ok, detail: c.detail, usable: d.usable }
    `)
    assert.equal(out.ok, true, out.detail)
    assert.match(out.detail, /own user and mount namespace/)
    assert.ok(out.usable.includes('process'))
  })
})

describe('paths check', () => {
  const probe = (closed: string[], othersWrite: string[] = []) => ({
    searchable: (dir: string) => !closed.includes(dir),
    rootOnlyAbove: (dir: string) => !othersWrite.some((d) => dir.startsWith(`${d}/`)),
  })
  const node = [{ what: 'node', path: '/root/.nvm/bin' }]

  it('not root: nothing to check; all reachable: ok', () => {
    assert.equal(pathsCheck(false, 'namespace', '/root/p', node, probe(['/root'])).ok, true)
    const c = pathsCheck(true, 'namespace', '/srv/p', [], probe([]))
    assert.equal(c.ok, true)
    assert.match(c.detail, /reachable/)
  })

  it('a cwd sandboxes cannot enter: not ok, with the fix', () => {
    const c = pathsCheck(true, 'namespace', '/root', [], probe(['/root']))
    assert.equal(c.ok, false)
    assert.match(c.fix ?? '', /chmod o\+x \/root/)
  })

  it('beneath a directory sandboxes cannot search: covered (ok); the process tier refuses it where others write above', () => {
    const ok = pathsCheck(true, 'namespace', '/root/p', node, probe(['/root']))
    assert.equal(ok.ok, true)
    assert.match(
      ok.detail,
      /^the working directory \/root\/p and node \/root\/.nvm\/bin are beneath \/root, /,
    )
    const refused = pathsCheck(true, 'process', '/var/tmp/x/p', [], probe(['/var/tmp/x'], ['/var/tmp']))
    assert.equal(refused.ok, false)
    assert.match(refused.detail, /process tier refuses/)
    assert.match(refused.fix ?? '', /chmod o\+x \/var\/tmp\/x.*namespace tier/)
  })
})

describe('what isolation auto runs, as run() decides it', () => {
  const caps = probeCapabilities()
  const installed = { ...caps, bwrap: '/usr/bin/bwrap', userns: true, launcher: '/x/cordon-launch' }

  it('the namespace tier when it is there and works', () => {
    assert.deepEqual(autoChoice(installed, true), {
      autoTier: 'namespace',
      picks: 'namespace',
      usable: ['namespace', 'process'],
    })
  })

  it('the process tier when bubblewrap or user namespaces are missing', () => {
    assert.deepEqual(autoChoice({ ...installed, bwrap: null }, false), {
      autoTier: 'process',
      picks: 'process',
      usable: ['process'],
    })
    assert.deepEqual(
      autoChoice({ ...installed, isRoot: true, userns: false, usernsReason: 'x' }, false).autoTier,
      'process',
    )
    // Not as root, no user namespace bounds the process tier's TMPDIR: it refuses every run.
    assert.deepEqual(autoChoice({ ...installed, isRoot: false, userns: false, usernsReason: 'x' }, false), {
      autoTier: null,
      picks: 'process',
      usable: [],
    })
  })

  // run() picks the namespace tier whenever bubblewrap is installed and user namespaces are allowed: a
  // bubblewrap that fails its probe is no fallback to the process tier, and the doctor must not say it is.
  it('none, when the tier auto picks is there but fails; the process tier still runs when asked for', () => {
    assert.deepEqual(autoChoice(installed, false), {
      autoTier: null,
      picks: 'namespace',
      usable: ['process'],
    })
  })

  it('none at all without the launcher', () => {
    assert.deepEqual(autoChoice({ ...installed, launcher: null }, false), {
      autoTier: null,
      picks: 'namespace',
      usable: [],
    })
  })
})
