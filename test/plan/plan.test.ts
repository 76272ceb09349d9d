// prepare() over policies × machines: which tier it picks, what it refuses (and as which limit), and the
// shape of the launch it plans. Capabilities are made by hand, so every machine is tried on this one; no
// process is started. The uid pool's locks live in a temp dir, and every plan is released.
import assert from 'node:assert/strict'
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { PolicyError } from '../../src/errors.js'
import type { Capabilities } from '../../src/host/capabilities.js'
import type { CgroupSupport } from '../../src/host/cgroups.js'
import { BRIDGE_PATH, LAUNCHER_PATH } from '../../src/host/native.js'
import { seccompArchOf } from '../../src/host/syscalls.js'
import { CALL_FDS, LOG_FD, REFUSAL_FD, SECCOMP_FD, STATUS_FD, TOKEN_FD } from '../../src/plan/fd-layout.js'
import { type LaunchPlan, type Prepared, prepare, releasePlan } from '../../src/plan/plan.js'
import { seccompProgram } from '../../src/plan/seccomp.js'
import { parsePolicy, type RunOptions } from '../../src/policy/schema.js'
import { noLauncher, tempDir } from '../helpers.js'

interface Machine {
  ns: boolean
  root: boolean
  cgroup: 1 | 2 | null
  landlock: number
}

const CGROUPS: Record<'1' | '2' | 'none', CgroupSupport> = {
  '2': { version: 2, parent: '/sys/fs/cgroup/test', mount: '/sys/fs/cgroup' },
  '1': {
    version: 1,
    parents: {
      memory: '/sys/fs/cgroup/memory/test',
      pids: '/sys/fs/cgroup/pids/test',
      cpuacct: '/sys/fs/cgroup/cpu,cpuacct/test',
    },
    mounts: {
      memory: '/sys/fs/cgroup/memory',
      pids: '/sys/fs/cgroup/pids',
      cpuacct: '/sys/fs/cgroup/cpu,cpuacct',
    },
    links: [],
  },
  none: { version: null, reason: 'no cgroup here' },
}

/** A machine's capabilities, by hand: the tools' paths are real (prepare opens the bridge), the rest is said. */
function machine(m: Machine, tools: Partial<Capabilities> = {}): Capabilities {
  return {
    isRoot: m.root,
    bwrap: '/usr/bin/bwrap',
    launcher: LAUNCHER_PATH,
    landlock: m.landlock,
    env: '/usr/bin/env',
    bridge: BRIDGE_PATH,
    userns: m.ns,
    usernsReason: m.ns ? null : 'user.max_user_namespaces is 0',
    cgroup: CGROUPS[m.cgroup === null ? 'none' : m.cgroup],
    faketime: null,
    seccompArch: seccompArchOf(),
    ...tools,
  }
}

/**
 * `machine(m)`, but where the process tier not as root could not run at all (no user namespaces: its
 * TMPDIR unbounded, refused) one with user namespaces and no bwrap: the process tier all the same.
 */
function runnable(m: Machine): Capabilities {
  return !m.ns && !m.root ? machine(m, { bwrap: null, userns: true, usernsReason: null }) : machine(m)
}

const seccomp = seccompArchOf() !== null
/** The fds a run pipes, per tier, before a called function's or the bridge's. */
const PIPED = {
  namespace: [STATUS_FD, REFUSAL_FD, ...(seccomp ? [SECCOMP_FD] : []), LOG_FD],
  process: [REFUSAL_FD, LOG_FD],
}

describe('prepare over policies × capabilities', { skip: noLauncher }, () => {
  let dir: string
  let writable: string
  let rootfs: string
  let lockDir: string
  const savedTmp = process.env.TMPDIR

  before(() => {
    dir = tempDir('cordon-prepare-', { mode: 0o755 })
    writable = path.join(dir, 'out')
    mkdirSync(writable)
    chmodSync(writable, 0o777) // the sandbox uid (as root) must be able to write it
    rootfs = path.join(dir, 'rootfs')
    mkdirSync(path.join(rootfs, 'usr/bin'), { recursive: true })
    writeFileSync(path.join(rootfs, 'usr/bin/true'), '', { mode: 0o755 })
    lockDir = path.join(dir, 'uids')
    mkdirSync(lockDir)
    // The process tier (not as root) names its private TMPDIR beneath os.tmpdir(): here, not the host's.
    process.env.TMPDIR = path.join(dir, 'tmp')
    mkdirSync(process.env.TMPDIR)
  })
  after(() => {
    if (savedTmp === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = savedTmp
  })

  /** prepare() with this test's cwd and uid pool; a plan is handed to `check` and then released. */
  async function prepared(
    caps: Capabilities,
    options: RunOptions,
    check: (p: Prepared) => void,
    command = ['true', 'x'],
  ): Promise<void> {
    const policy = parsePolicy({ cwd: dir, uidPool: { first: 61_000, count: 4, lockDir }, ...options })
    // The directory of the run's proxy sockets, which the launch binds in with an allowlist.
    const netDir = typeof policy.network === 'object' ? path.join(dir, 'net') : undefined
    const p = prepare(command, policy, caps, undefined, netDir)
    try {
      check(p)
    } finally {
      if (p.kind === 'launch') await releasePlan(p.plan)
    }
  }

  const launched = (p: Prepared): LaunchPlan => {
    if (p.kind !== 'launch') assert.fail(`refused: ${p.violation.limit}: ${p.violation.message}`)
    return p.plan
  }
  const refusal = (p: Prepared) => {
    if (p.kind !== 'refused') assert.fail(`launched the ${p.plan.tier} tier`)
    return { tier: p.tier, kind: p.violation.kind, limit: p.violation.limit }
  }
  /** What the launcher executes: everything after its own `--`. */
  const inner = (plan: LaunchPlan) => plan.args.slice(plan.args.indexOf('--') + 1)

  const machines: Machine[] = []
  for (const ns of [true, false])
    for (const root of [true, false])
      for (const cgroup of [1, 2, null] as const)
        for (const landlock of [0, 6]) machines.push({ ns, root, cgroup, landlock })
  const label = (m: Machine) =>
    `${m.ns ? 'namespaces' : 'no namespaces'}, ${m.root ? 'root' : 'not root'}, cgroup ${m.cgroup ? `v${m.cgroup}` : 'none'}, landlock ${m.landlock}`

  describe('the default policy', () => {
    for (const m of machines) {
      // Not as root, without user namespaces, the process tier's TMPDIR cannot be bounded: refused.
      const unbounded = !m.ns && !m.root
      it(`${label(m)}: ${m.ns ? 'namespace' : 'process'} tier through the launcher${unbounded ? ', refused' : ''}`, async () => {
        await prepared(machine(m), {}, (p) => {
          if (unbounded) {
            assert.deepEqual(refusal(p), { tier: 'process', kind: 'error', limit: 'limits.tmpfsBytes' })
            assert.match(
              p.kind === 'refused' ? p.violation.message : '',
              /^the process tier not as root bounds its TMPDIR \(64M\) with a tmpfs in a user namespace of its own, and this machine allows none \(user\.max_user_namespaces is 0\)/,
            )
            return
          }
          const plan = launched(p)
          const tier = m.ns ? 'namespace' : 'process'
          assert.equal(plan.tier, tier)
          assert.equal(plan.file, LAUNCHER_PATH)
          assert.equal(plan.cwd, '/')
          assert.deepEqual(plan.fds, PIPED[tier])
          const program = inner(plan)
          if (tier === 'namespace') {
            assert.equal(program[0], '/usr/bin/bwrap')
            assert.ok(plan.args.includes('--bwrap-env'))
            assert.ok(!plan.args.includes('--monitor'))
          } else {
            assert.ok(!plan.args.includes('/usr/bin/bwrap'))
            assert.equal(path.basename(program[0]!), 'true')
            assert.equal(program[1], 'x')
            assert.ok(plan.args.includes('--monitor'))
          }
          // The uid: one of the pool's as root, else this user's.
          assert.equal(plan.lease !== null, m.root)
          assert.equal(plan.args.includes(`--uid=${plan.lease?.uid}`), m.root)
          // The cgroup: joined by the launcher when there is one; else the limits hold per process.
          assert.equal(plan.cgroup?.support.version ?? null, m.cgroup)
          assert.equal(
            plan.args.some((a) => a.startsWith('--join=')),
            m.cgroup !== null,
          )
          assert.equal(plan.perProcessLimits.includes('memoryBytes'), m.cgroup === null)
          // The process tier's own fences: Landlock, and a mount namespace as root or a TMPDIR on the host.
          const fenced = tier === 'process'
          assert.equal(plan.args.includes('--landlock-fs'), fenced && m.landlock >= 1)
          assert.equal(plan.args.includes('--scope-signals'), fenced && m.landlock >= 6)
          assert.equal(plan.args.includes('--mount-ns'), fenced && m.root)
          assert.equal(plan.scratch !== null, fenced && !m.root)
          assert.equal(
            plan.args.includes(`--own-tmpfs=${64 * 1024 * 1024}`),
            fenced && !m.root,
            'not as root its TMPDIR is a tmpfs of its own',
          )
          if (plan.scratch) {
            assert.equal(path.dirname(plan.scratch), process.env.TMPDIR)
            assert.equal(plan.env.TMPDIR, plan.scratch)
          }
          assert.equal(plan.seccomp !== null, seccomp)
          assert.equal(
            plan.args.some((a) => a.startsWith('--seccomp=')),
            fenced && seccomp,
          )
          assert.equal(plan.env.CORDON_LOG_FD, String(LOG_FD))
        })
      })
    }
  })

  // [isolation asked for, namespaces available, tier chosen, refused as] (not as root: the process tier
  // without user namespaces cannot bound its TMPDIR)
  const tiers: [RunOptions['isolation'], boolean, 'namespace' | 'process', string | null][] = [
    ['auto', true, 'namespace', null],
    ['auto', false, 'process', 'limits.tmpfsBytes'],
    ['namespace', true, 'namespace', null],
    ['namespace', false, 'namespace', 'isolation'],
    ['process', true, 'process', null],
    ['process', false, 'process', 'limits.tmpfsBytes'],
  ]
  describe('isolation', () => {
    for (const [isolation, ns, tier, refused] of tiers) {
      it(`${isolation}, ${ns ? 'with' : 'without'} namespaces: the ${tier} tier${refused ? ', refused' : ''}`, async () => {
        await prepared(machine({ ns, root: false, cgroup: null, landlock: 0 }), { isolation }, (p) => {
          if (refused) assert.deepEqual(refusal(p), { tier, kind: 'error', limit: refused })
          else assert.equal(launched(p).tier, tier)
        })
      })
    }
    it('not as root, with user namespaces: the process tier bounds its TMPDIR and /dev/shm with tmpfs of its own', async () => {
      const caps = machine({ ns: true, root: false, cgroup: null, landlock: 6 }, { bwrap: null })
      await prepared(caps, { limits: { tmpfsBytes: '8M' } }, (p) => {
        const plan = launched(p)
        assert.equal(plan.tier, 'process')
        assert.ok(plan.scratch)
        assert.ok(plan.args.includes(`--mkdir=${plan.scratch}`))
        assert.ok(plan.args.includes(`--own-tmpfs=${8 * 1024 * 1024}`))
        assert.ok(!plan.args.includes('--mount-ns'))
        assert.deepEqual(plan.perProcessLimits, ['cpuTimeMs', 'memoryBytes', 'maxProcesses'])
        if (existsSync('/dev/shm')) assert.ok(plan.args.includes('--landlock-write=/dev/shm'))
      })
    })
    it('without bwrap, auto is the process tier and namespace is refused', async () => {
      const caps = machine({ ns: true, root: false, cgroup: null, landlock: 0 }, { bwrap: null })
      await prepared(caps, {}, (p) => assert.equal(launched(p).tier, 'process'))
      await prepared(caps, { isolation: 'namespace' }, (p) =>
        assert.deepEqual(refusal(p), { tier: 'namespace', kind: 'error', limit: 'isolation' }),
      )
    })
    it('without the launcher, both tiers are refused', async () => {
      for (const isolation of ['namespace', 'process'] as const) {
        const caps = machine({ ns: true, root: false, cgroup: null, landlock: 0 }, { launcher: null })
        await prepared(caps, { isolation }, (p) =>
          assert.deepEqual(refusal(p), { tier: isolation, kind: 'error', limit: 'isolation' }),
        )
      }
    })
  })

  describe('a network allowlist', () => {
    const network = { allow: ['example.com'] }
    for (const root of [true, false]) {
      it(`${root ? 'as root' : 'not as root'}: the namespace tier with the bridge and its token`, async () => {
        await prepared(machine({ ns: true, root, cgroup: 2, landlock: 0 }), { network }, (p) => {
          const plan = launched(p)
          assert.equal(plan.tier, 'namespace')
          assert.deepEqual(plan.fds, [...PIPED.namespace, TOKEN_FD])
          assert.ok(plan.env.HTTPS_PROXY?.startsWith('http://127.0.0.1:'))
          assert.ok(
            plan.pathFds.passed.some((f) => f.path === BRIDGE_PATH),
            'the bridge is bound in by fd',
          )
          assert.ok(inner(plan).includes('--'), 'bwrap runs the bridge, which runs the program')
        })
      })
    }
    it('is refused where only the process tier is (auto or asked for)', async () => {
      await prepared(machine({ ns: false, root: false, cgroup: null, landlock: 6 }), { network }, (p) =>
        assert.deepEqual(refusal(p), { tier: 'process', kind: 'error', limit: 'network' }),
      )
      await prepared(
        machine({ ns: true, root: true, cgroup: 2, landlock: 6 }),
        { network, isolation: 'process' },
        (p) => assert.deepEqual(refusal(p), { tier: 'process', kind: 'error', limit: 'network' }),
      )
    })
    it('is refused without the bridge', async () => {
      const caps = machine({ ns: true, root: false, cgroup: null, landlock: 0 }, { bridge: null })
      await prepared(caps, { network }, (p) =>
        assert.deepEqual(refusal(p), { tier: 'namespace', kind: 'error', limit: 'network' }),
      )
    })
  })

  describe('writable paths', () => {
    for (const m of machines.filter((m) => m.cgroup === 2)) {
      it(`${label(m)}: passed by the fd they were judged on`, async () => {
        await prepared(runnable(m), { writable: [writable] }, (p) => {
          const plan = launched(p)
          const uses = plan.pathFds.passed.filter((f) => f.path === writable)
          if (plan.tier === 'namespace') {
            // bwrap binds it from its fd.
            assert.equal(uses.length, 1)
            const at = inner(plan).indexOf('--bind-fd')
            assert.ok(at > 0 && inner(plan)[at + 1] === String(uses[0]!.child))
          } else {
            // A Landlock rule made from its fd (as root, beneath the cwd, it is shown again with the cwd).
            assert.equal(uses.length, m.landlock >= 1 ? 1 : 0)
            if (m.landlock >= 1) assert.ok(plan.args.includes(`--landlock-write-fd=${uses[0]!.child}`))
          }
          for (const use of uses)
            assert.ok(plan.args[0]!.split('=')[1]!.split(',').includes(String(use.child)))
        })
      })
    }
    it('under /proc: never, whatever the tier', async () => {
      for (const isolation of ['namespace', 'process'] as const) {
        assert.throws(
          () =>
            prepare(
              ['true'],
              parsePolicy({ cwd: dir, isolation, writable: ['/proc/self'] }),
              machine({ ns: true, root: false, cgroup: null, landlock: 0 }),
            ),
          (e: unknown) => e instanceof PolicyError && e.field === 'writable.0',
        )
      }
    })
  })

  describe('another root filesystem', () => {
    it('runs in the namespace tier, the command looked up in it', async () => {
      await prepared(machine({ ns: true, root: false, cgroup: null, landlock: 0 }), { rootfs }, (p) => {
        const plan = launched(p)
        assert.equal(plan.tier, 'namespace')
        // Its directories are bound by the fds they were judged on, never by name.
        assert.ok(plan.pathFds.passed.some((f) => f.path.startsWith(`${rootfs}/`)))
        assert.ok(!inner(plan).some((a) => a.startsWith(`${rootfs}/`)))
      })
    })
    it('is refused by the process tier', async () => {
      await prepared(machine({ ns: false, root: true, cgroup: 1, landlock: 6 }), { rootfs }, (p) =>
        assert.deepEqual(refusal(p), { tier: 'process', kind: 'error', limit: 'rootfs' }),
      )
    })
    it("that is absent is the caller's error, before any tier is chosen", () => {
      const absent = path.join(dir, 'no-such-rootfs')
      assert.throws(
        () =>
          prepare(
            ['true'],
            parsePolicy({ cwd: dir, rootfs: absent }),
            machine({ ns: true, root: false, cgroup: null, landlock: 0 }),
          ),
        (e: unknown) => e instanceof PolicyError && e.field === 'rootfs',
      )
    })
  })

  describe('other refusals', () => {
    const anywhere = machine({ ns: true, root: false, cgroup: null, landlock: 6 })
    const cases: [string, RunOptions, Capabilities, { tier: string; kind: string; limit: string }][] = [
      [
        'hide in the process tier',
        { isolation: 'process', hide: ['/etc'] },
        anywhere,
        { tier: 'process', kind: 'error', limit: 'hide' },
      ],
      [
        'readable in the process tier',
        { isolation: 'process', readable: ['.'] },
        anywhere,
        { tier: 'process', kind: 'error', limit: 'readable' },
      ],
      [
        'a clock without libfaketime',
        { clock: { start: '2020-01-01T00:00:00Z' } },
        anywhere,
        { tier: 'namespace', kind: 'error', limit: 'clock' },
      ],
      [
        'a cgroup parent where there are no cgroups',
        { cgroup: { mode: 'auto', parent: '/x' } },
        anywhere,
        { tier: 'namespace', kind: 'error', limit: 'cgroup' },
      ],
      [
        'a denied command',
        { deny: ['true'] },
        anywhere,
        { tier: 'namespace', kind: 'denied', limit: 'deny' },
      ],
      [
        'denySyscalls where cordon has no seccomp filter (namespace tier)',
        { denySyscalls: ['mkdir'] },
        { ...anywhere, seccompArch: null },
        { tier: 'namespace', kind: 'error', limit: 'denySyscalls' },
      ],
      [
        'denySyscalls where cordon has no seccomp filter (process tier)',
        { isolation: 'process', denySyscalls: ['mkdir'] },
        { ...anywhere, seccompArch: null },
        { tier: 'process', kind: 'error', limit: 'denySyscalls' },
      ],
    ]
    for (const [name, options, caps, expected] of cases) {
      it(name, async () => {
        await prepared(caps, options, (p) => assert.deepEqual(refusal(p), expected))
      })
    }
    it('a command not found', async () => {
      await prepared(anywhere, {}, (p) => assert.equal(refusal(p).kind, 'not-found'), [
        'no-such-command-here',
      ])
    })
    it('a uid pool with none free, as root', async () => {
      const caps = machine({ ns: true, root: true, cgroup: null, landlock: 0 })
      const pool = { first: 62_000, count: 1, lockDir }
      const first = launched(prepare(['true'], parsePolicy({ cwd: dir, uidPool: pool }), caps))
      try {
        const second = prepare(['true'], parsePolicy({ cwd: dir, uidPool: pool }), caps)
        assert.deepEqual(refusal(second), { tier: 'namespace', kind: 'error', limit: 'uidPool' })
      } finally {
        await releasePlan(first)
      }
    })
  })

  describe('the seccomp filter', () => {
    const AUDIT = { x86_64: 0xc000003e, aarch64: 0xc00000b7 } as const
    for (const arch of ['x86_64', 'aarch64'] as const) {
      for (const ns of [true, false]) {
        it(`on ${arch}, ${ns ? 'namespace' : 'process'} tier: that architecture's program`, async () => {
          const caps = ns
            ? machine({ ns, root: false, cgroup: null, landlock: 0 }, { seccompArch: arch })
            : machine(
                { ns, root: false, cgroup: null, landlock: 0 },
                { seccompArch: arch, bwrap: null, userns: true, usernsReason: null },
              )
          await prepared(caps, { denySyscalls: ['mkdir'] }, (p) => {
            const plan = launched(p)
            // The program's first check is of the architecture it was built for.
            assert.equal(plan.seccomp?.readUInt32LE(12), AUDIT[arch])
            if (!ns) {
              const hex = plan.args.find((a) => a.startsWith('--seccomp='))
              assert.equal(hex, `--seccomp=${plan.seccomp!.toString('hex')}`)
            }
          })
        })
      }
    }

    it('a call the architecture lacks refuses nothing there: the same program as without it', async () => {
      const caps = machine({ ns: true, root: false, cgroup: null, landlock: 0 }, { seccompArch: 'aarch64' })
      let withOpen: Buffer | null = null
      await prepared(caps, { denySyscalls: ['open', 'mkdirat'] }, (p) => {
        withOpen = Buffer.from(launched(p).seccomp!)
      })
      await prepared(caps, { denySyscalls: ['mkdirat'] }, (p) => {
        assert.deepEqual(withOpen, launched(p).seccomp)
      })
      assert.notDeepEqual(withOpen, seccompProgram('aarch64'))
    })

    for (const ns of [true, false]) {
      it(`without a filter for this machine, ${ns ? 'namespace' : 'process'} tier: none is passed`, async () => {
        const caps = ns
          ? machine({ ns, root: false, cgroup: null, landlock: 0 }, { seccompArch: null })
          : machine(
              { ns, root: false, cgroup: null, landlock: 0 },
              { seccompArch: null, bwrap: null, userns: true, usernsReason: null },
            )
        await prepared(caps, {}, (p) => {
          const plan = launched(p)
          assert.equal(plan.seccomp, null)
          assert.ok(!plan.fds.includes(SECCOMP_FD))
          assert.ok(!plan.args.some((a) => a.startsWith('--seccomp')))
        })
      })
    }
  })

  it('a called function pipes its request and reply, in either tier', async () => {
    for (const ns of [true, false]) {
      const caps = runnable({ ns, root: false, cgroup: null, landlock: 0 })
      const policy = parsePolicy({ cwd: dir })
      const plan = launched(prepare(['true'], policy, caps, [os.tmpdir()]))
      try {
        assert.deepEqual(plan.fds, [...PIPED[plan.tier], CALL_FDS.request, CALL_FDS.reply])
      } finally {
        await releasePlan(plan)
      }
    }
  })
})
