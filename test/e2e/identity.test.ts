// Who the sandbox is: its own minimal /etc/passwd and /etc/group (root, `sandbox` with the run's uid and
// gid, nobody), never the host's list of users, so whoami, id, getpass and os.userInfo() name it.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { probeCapabilities } from '../../src/host/capabilities.js'
import { callFunction, run } from '../../src/index.js'
import { SANDBOX_USER } from '../../src/plan/identity.js'
import { asUnprivileged, noLauncher, noNamespace, noUnprivileged, skipTier, TIERS } from '../helpers.js'

const caps = probeCapabilities()
/** A user of the host's other than root and nobody, which the sandbox must not learn of. */
const hostUser = readFileSync('/etc/passwd', 'utf8')
  .split('\n')
  .map((line) => line.split(':')[0] ?? '')
  .find((name) => name !== '' && name !== 'root' && name !== 'nobody')
const noHostUser = hostUser ? false : 'the host lists no user but root and nobody'
const noPython =
  spawnSync('/usr/bin/env', ['PATH=/usr/local/bin:/usr/bin:/bin', 'python3', '-c', '0']).status === 0
    ? false
    : 'no python3 on the safe PATH'
/** The process tier gets its own files only in its own mount namespace, which needs root. */
const noOwnFiles = (tier: (typeof TIERS)[number]) =>
  skipTier(tier) ||
  (tier === 'process' && !caps.isRoot ? 'the process tier has its own /etc/passwd only as root' : false)

// Outside /tmp (private in the sandbox), readable by any sandbox uid.
const dir = mkdtempSync('/var/tmp/cordon-identity-')
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))
const mod = path.join(dir, 'who.mjs')
writeFileSync(
  mod,
  `import os from 'node:os'
export function who() { const u = os.userInfo(); return { username: u.username, uid: u.uid, gid: u.gid, homedir: u.homedir, shell: u.shell } }
`,
)

for (const tier of TIERS) {
  const isolation = tier
  describe(`the sandbox's own user (${tier} tier)`, { skip: noOwnFiles(tier) }, () => {
    it('whoami, id -un and id -gn name it; id shows its uid and gid', async () => {
      const r = await run(['sh', '-c', 'whoami; id -un; id -gn; id -u; id -g; echo "$HOME"'], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      const [whoami, un, gn, uid, gid, home] = r.stdout.split('\n')
      assert.equal(whoami, SANDBOX_USER)
      assert.equal(un, SANDBOX_USER)
      assert.equal(gn, SANDBOX_USER)
      assert.match(uid ?? '', /^\d+$/)
      assert.notEqual(uid, '0')
      // Its home is the HOME cordon gives it.
      const entry = await run(['sh', '-c', `grep "^${SANDBOX_USER}:" /etc/passwd`], { isolation })
      const fields = entry.stdout.trim().split(':')
      assert.equal(fields[5], home)
      assert.equal(fields[6], '/bin/sh')
      assert.equal(fields[3], gid)
    })

    it("holds root, the sandbox's user and nobody, none of the host's other users; read-only", async () => {
      const r = await run(
        [
          'sh',
          '-c',
          'cut -d: -f1 /etc/passwd; echo --; cut -d: -f1 /etc/group; echo x >> /etc/passwd || echo ro',
        ],
        { isolation, writable: [] },
      )
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, `root\n${SANDBOX_USER}\nnobody\n--\nroot\n${SANDBOX_USER}\nnogroup\nro\n`)
    })

    it('the program holds no fd of them (bwrap closes what it copied)', async () => {
      const r = await run(['ls', '/proc/self/fd'], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      const fds = r.stdout.split('\n').filter(Boolean).map(Number)
      assert.deepEqual(
        fds.filter((fd) => fd > 3),
        // ls's own directory fd is 3; the log channel is 6.
        [6],
      )
    })

    it("a host user's name means nothing inside", { skip: noHostUser }, async () => {
      const r = await run(['id', hostUser!], { isolation })
      assert.equal(r.status, 'nonzero-exit')
      assert.match(r.stderr, /no such user/)
    })

    it('Python getpass.getuser() and pwd name it', { skip: noPython }, async () => {
      const r = await run(
        [
          'python3',
          '-c',
          'import getpass, os, pwd; print(getpass.getuser()); print(pwd.getpwuid(os.getuid()).pw_dir == os.environ["HOME"])',
        ],
        { isolation },
      )
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, `${SANDBOX_USER}\nTrue\n`)
    })

    it('Node os.userInfo() names it, in a program and in a called function', async () => {
      const r = await run(
        [
          'node',
          '-e',
          'const u = require("os").userInfo(); console.log(u.username, u.homedir === process.env.HOME)',
        ],
        { isolation },
      )
      assert.equal(r.status, 'ok', r.stderr)
      assert.equal(r.stdout, `${SANDBOX_USER} true\n`)
      const c = await callFunction<{ username: string; shell: string }>(mod, 'who', [], { isolation })
      assert.equal(c.status, 'ok', c.stderr)
      assert.equal(c.value?.username, SANDBOX_USER)
      assert.equal(c.value?.shell, '/bin/sh')
    })

    it('follows a HOME the policy sets', async () => {
      const r = await run(['sh', '-c', `grep "^${SANDBOX_USER}:" /etc/passwd | cut -d: -f6`], {
        isolation,
        env: { HOME: '/var/tmp' },
      })
      assert.equal(r.stdout, '/var/tmp\n')
    })
  })
}

describe("the namespace tier's strict mode", { skip: noNamespace }, () => {
  it("gets cordon's files too, not the host's", async () => {
    const r = await run(['sh', '-c', 'whoami; cut -d: -f1 /etc/passwd | tr "\\n" " "'], {
      isolation: 'namespace',
      cwd: '/',
      readable: [],
    })
    assert.equal(r.status, 'ok', r.stderr)
    assert.equal(r.stdout, `${SANDBOX_USER}\nroot ${SANDBOX_USER} nobody `)
  })

  it('with all of /etc readable, /etc/passwd is still its own; a hidden one stays hidden', async () => {
    const a = await run(['cut', '-d:', '-f1', '/etc/passwd'], {
      isolation: 'namespace',
      cwd: '/',
      readable: ['/etc'],
    })
    assert.equal(a.stdout, `root\n${SANDBOX_USER}\nnobody\n`)
    const b = await run(['sh', '-c', 'wc -c < /etc/passwd; whoami'], {
      isolation: 'namespace',
      hide: ['/etc/passwd'],
    })
    assert.match(b.stdout, /^0\n/)
  })
})

describe('not as root', { skip: noLauncher || noUnprivileged() }, () => {
  it('the namespace tier names its user (bwrap maps this user to itself)', {
    skip: noNamespace,
  }, async () => {
    const out = await asUnprivileged<{ stdout: string; status: string }>(`
      const r = await run(['sh', '-c', 'whoami; id -u; cut -d: -f1 /etc/passwd | tr "\\n" " "'], { isolation: 'namespace' })
      return { stdout: r.stdout, status: r.status }
    `)
    assert.equal(out.status, 'ok')
    const uid = caps.isRoot ? 65534 : process.getuid?.()
    // As nobody (65534) the sandbox's own user takes its id: nobody is left out, each id has one name.
    const users = uid === 65534 ? `root ${SANDBOX_USER} ` : `root ${SANDBOX_USER} nobody `
    assert.equal(out.stdout, `${SANDBOX_USER}\n${uid}\n${users}`)
  })

  it("the process tier keeps the host's files (no mount namespace): whoami names the host's user", async () => {
    const out = await asUnprivileged<{ stdout: string; status: string }>(`
      const r = await run(['whoami'], { isolation: 'process' })
      return { stdout: r.stdout, status: r.status }
    `)
    assert.equal(out.status, 'ok')
    assert.notEqual(out.stdout, `${SANDBOX_USER}\n`)
  })
})
