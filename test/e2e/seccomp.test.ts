// Each refused system call, called for real from inside a sandbox.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { probeCapabilities, run } from '../../src/index.js'
import { skipTier, TIERS } from '../helpers.js'

const EPERM = 1
// Raw syscalls with 64-bit arguments, so the high-bits ioctl variant reaches the kernel untruncated.
const probe = (calls: [string, number, ...number[]][]) => `
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
for name, nr, *args in ${JSON.stringify(calls)}:
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    out[name] = ctypes.get_errno() if r == -1 else 0
print(json.dumps(out))
`

const REFUSED: [string, number, ...number[]][] = [
  ['ptrace', 101, 0, 0, 0, 0],
  ['process_vm_readv', 310, 1, 0, 0, 0, 0, 0],
  ['process_vm_writev', 311, 1, 0, 0, 0, 0, 0],
  ['mount', 165, 0, 0, 0, 0, 0],
  ['umount2', 166, 0, 0],
  ['pivot_root', 155, 0, 0],
  ['kexec_load', 246, 0, 0, 0, 0],
  ['kexec_file_load', 320, 0, 0, 0, 0, 0],
  ['init_module', 175, 0, 0, 0],
  ['finit_module', 313, 0, 0, 0],
  ['delete_module', 176, 0, 0],
  ['bpf', 321, 0, 0, 0],
  ['perf_event_open', 298, 0, 0, 0, 0, 0],
  ['keyctl', 250, 0, 0, 0, 0, 0],
  ['add_key', 248, 0, 0, 0, 0, 0],
  ['request_key', 249, 0, 0, 0, 0],
  ['userfaultfd', 323, 0],
  ['io_uring_setup', 425, 1, 0],
  ['io_uring_enter', 426, 0, 0, 0, 0, 0, 0],
  ['io_uring_register', 427, 0, 0, 0, 0],
  ['setns', 308, 0, 0],
  // FAN_CLASS_NOTIF | FAN_REPORT_FID: what an unprivileged caller may ask for (Linux 5.13+).
  ['fanotify_init', 300, 0x200, 0],
  ['unshare(CLONE_NEWUSER)', 272, 0x10000000],
  ['unshare(CLONE_NEWNS)', 272, 0x00020000],
  ['clone(CLONE_NEWUSER)', 56, 0x10000000 | 17, 0, 0, 0, 0],
  ['personality(ADDR_NO_RANDOMIZE)', 135, 0x0040000],
  ['ioctl(TIOCSTI)', 16, 0, 0x5412, 0],
  ['ioctl(TIOCSTI high bits)', 16, 0, 0x1_0000_5412, 0],
  ['ioctl(TIOCLINUX)', 16, 0, 0x541c, 0],
  ['socket(policy)', 41, 2, 1, 0],
]

const EAFNOSUPPORT = 97
/** The families a sandbox needs: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK. */
const NETWORK_FAMILIES = [1, 2, 10, 16]

/**
 * Every socket family 0-63 (and one with high bits the kernel ignores), every type, through socket() and
 * socketpair(): which ones open, and the errno of each refusal. AF_VSOCK (40) opens on this kind of host
 * (a VM) and reaches the hypervisor; AF_ALG (38), AF_PACKET (17), AF_KEY (15) are kernel surface too.
 */
const FAMILY_PROBE = `
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
opened, errnos = set(), {}
fds = (ctypes.c_int * 2)()
for fam in list(range(64)) + [0x100000028]:
    for typ in (1, 2, 3, 5):
        for call in ('socket', 'socketpair'):
            ctypes.set_errno(0)
            if call == 'socket':
                r = libc.syscall(ctypes.c_long(41), ctypes.c_long(fam), ctypes.c_long(typ), ctypes.c_long(0))
                if r >= 0: libc.close(r)
            else:
                r = libc.syscall(ctypes.c_long(53), ctypes.c_long(fam), ctypes.c_long(typ), ctypes.c_long(0), fds)
                if r == 0: libc.close(fds[0]); libc.close(fds[1])
            key = fam & 0xffffffff
            if r >= 0: opened.add(key)
            else: errnos.setdefault(str(key), set()).add(ctypes.get_errno())
print(json.dumps({'opened': sorted(opened), 'errnos': {k: sorted(v) for k, v in errnos.items()}}))
`

const bridge = probeCapabilities().bridge
const NETWORKS = [
  ['none', 'none'],
  ['host', 'host'],
  ['allowlist', { allow: ['example.com'] }],
] as const

for (const isolation of TIERS) {
  describe(`socket families (${isolation} tier)`, { skip: skipTier(isolation) }, () => {
    for (const [name, network] of NETWORKS) {
      const skip =
        name === 'allowlist' && isolation === 'process'
          ? 'the process tier refuses an allowlist'
          : name === 'allowlist' && !bridge
            ? "a network allowlist needs cordon's network bridge (npm run build)"
            : false
      // The process tier without a network namespace of its own keeps to AF_UNIX (as before).
      const allowed = isolation === 'process' && name === 'none' ? [1] : NETWORK_FAMILIES
      it(`network ${name}: only ${allowed.join(', ')} open; every other family is EAFNOSUPPORT`, {
        skip,
      }, async () => {
        const r = await run(['python3', '-c', FAMILY_PROBE], { isolation, network })
        assert.equal(r.status, 'ok', r.stderr)
        const { opened, errnos } = JSON.parse(r.stdout) as {
          opened: number[]
          errnos: Record<string, number[]>
        }
        assert.ok(!opened.includes(40), 'AF_VSOCK is refused')
        for (const fam of opened) assert.ok(allowed.includes(fam), `family ${fam} opened`)
        for (let fam = 0; fam < 64; fam++) {
          if (allowed.includes(fam)) continue
          assert.deepEqual(errnos[String(fam)], [EAFNOSUPPORT], `family ${fam}`)
        }
        // The high bits of the family are not the kernel's: 0x1_0000_0028 is AF_VSOCK to it, refused too.
        assert.deepEqual(errnos[String(40)], [EAFNOSUPPORT])
        assert.ok(opened.includes(1), 'AF_UNIX still opens')
      })
    }
  })
}

for (const isolation of TIERS) {
  describe(`seccomp (${isolation} tier)`, { skip: skipTier(isolation) }, () => {
    it('the filter is installed', async () => {
      const r = await run(['grep', '-E', '^Seccomp', '/proc/self/status'], { isolation })
      assert.match(r.stdout, /Seccomp:\s+2/)
    })

    it('refuses each listed call with EPERM', async () => {
      const r = await run(['python3', '-c', probe(REFUSED)], { denySyscalls: ['socket'], isolation })
      assert.equal(r.status, 'ok', r.stderr)
      const errnos = JSON.parse(r.stdout) as Record<string, number>
      for (const [name] of REFUSED) assert.equal(errnos[name], EPERM, name)
    })

    it('still allows what programs need: harmless personality, plain clone, ordinary ioctl', async () => {
      const allowed: [string, number, ...number[]][] = [
        ['personality(query)', 135, 0xffffffff],
        ['getpid', 39],
      ]
      const r = await run(
        ['python3', '-c', `${probe(allowed)}\nimport subprocess; subprocess.run(["true"], check=True)`],
        { isolation },
      )
      assert.equal(r.status, 'ok', r.stderr)
      assert.deepEqual(JSON.parse(r.stdout), { 'personality(query)': 0, getpid: 0 })
    })

    it('kernel AIO is ENOSYS (its rings count against the host-wide aio-max-nr); io_uring EPERM', async () => {
      const code = [
        'import ctypes',
        'libc = ctypes.CDLL(None, use_errno=True)',
        'ctx = ctypes.c_ulong(0)',
        'r = libc.syscall(ctypes.c_long(206), ctypes.c_long(128), ctypes.byref(ctx))',
        'print(ctypes.get_errno() if r == -1 else 0)',
        'print(ctypes.get_errno() if libc.syscall(ctypes.c_long(425), 1, ctypes.byref(ctx)) == -1 else 0)',
      ].join('\n')
      const r = await run(['python3', '-c', code], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      assert.deepEqual(r.stdout.trim().split('\n'), ['38', String(EPERM)])
    })

    it('kills an x32 system call (the non-native ABI bypass)', async () => {
      const r = await run(
        ['python3', '-c', 'import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39); print("alive")'],
        { isolation },
      )
      assert.equal(r.status, 'signaled')
      assert.equal(r.signal, 'SIGSYS')
      assert.equal(r.stdout, '')
    })
  })
}
