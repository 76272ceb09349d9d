// Each refused system call, called for real from inside a sandbox.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { syscallNumber } from '../../src/host/syscalls.js'
import { probeCapabilities, type RunOptions, run } from '../../src/index.js'
import { prepare, releasePlan } from '../../src/plan/plan.js'
import { parsePolicy } from '../../src/policy/schema.js'
import { skipTier, TIERS } from '../helpers.js'
import { ALLOW, AUDIT_ARCH, decode, errno, runFilter, verdictName } from '../plan/cbpf.js'

const EPERM = 1
const arch = probeCapabilities().seccompArch
const noFilter = arch ? false : `cordon has no seccomp filter for ${process.arch}`
/** The number of `name` on this machine (the tests are skipped where cordon has no filter). */
const nr = (name: string) => {
  const n = arch && syscallNumber(name, arch)
  if (n === undefined || n === null) throw new Error(`${name} is not a system call on ${arch}`)
  return n
}

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

/** [label, call, arguments] */
type Call = [string, string, ...number[]]
const numbered = (calls: Call[]) =>
  calls.map(([label, name, ...args]): [string, number, ...number[]] => [label, nr(name), ...args])

const REFUSED: Call[] = [
  ['ptrace', 'ptrace', 0, 0, 0, 0],
  ['process_vm_readv', 'process_vm_readv', 1, 0, 0, 0, 0, 0],
  ['process_vm_writev', 'process_vm_writev', 1, 0, 0, 0, 0, 0],
  ['mount', 'mount', 0, 0, 0, 0, 0],
  ['umount2', 'umount2', 0, 0],
  ['pivot_root', 'pivot_root', 0, 0],
  ['open_tree_attr', 'open_tree_attr', -100, 0, 1, 0, 0],
  ['kexec_load', 'kexec_load', 0, 0, 0, 0],
  ['kexec_file_load', 'kexec_file_load', 0, 0, 0, 0, 0],
  ['init_module', 'init_module', 0, 0, 0],
  ['finit_module', 'finit_module', 0, 0, 0],
  ['delete_module', 'delete_module', 0, 0],
  ['bpf', 'bpf', 0, 0, 0],
  ['perf_event_open', 'perf_event_open', 0, 0, 0, 0, 0],
  ['keyctl', 'keyctl', 0, 0, 0, 0, 0],
  ['add_key', 'add_key', 0, 0, 0, 0, 0],
  ['request_key', 'request_key', 0, 0, 0, 0],
  ['userfaultfd', 'userfaultfd', 0],
  ['io_uring_setup', 'io_uring_setup', 1, 0],
  ['io_uring_enter', 'io_uring_enter', 0, 0, 0, 0, 0, 0],
  ['io_uring_register', 'io_uring_register', 0, 0, 0, 0],
  ['setns', 'setns', 0, 0],
  // FAN_CLASS_NOTIF | FAN_REPORT_FID: what an unprivileged caller may ask for (Linux 5.13+).
  ['fanotify_init', 'fanotify_init', 0x200, 0],
  ['unshare(CLONE_NEWUSER)', 'unshare', 0x10000000],
  ['unshare(CLONE_NEWNS)', 'unshare', 0x00020000],
  ['clone(CLONE_NEWUSER)', 'clone', 0x10000000 | 17, 0, 0, 0, 0],
  ['personality(ADDR_NO_RANDOMIZE)', 'personality', 0x0040000],
  ['ioctl(TIOCSTI)', 'ioctl', 0, 0x5412, 0],
  ['ioctl(TIOCSTI high bits)', 'ioctl', 0, 0x1_0000_5412, 0],
  ['ioctl(TIOCLINUX)', 'ioctl', 0, 0x541c, 0],
  ['socket(policy)', 'socket', 2, 1, 0],
]

const S_IFREG = 0o100000
const O_CREAT = 0o100
/**
 * Calls whose verdict the kernel and the BPF interpreter must agree on, refused or not. The allowed ones
 * fail harmlessly (a NULL path, fd -1) with an errno no rule of the filter gives (EFAULT, EBADF, EINVAL),
 * so an interpreter that allowed what the kernel's filter refuses, or the reverse, shows.
 */
const DIFFERENTIAL: Call[] = [
  ['getpid', 'getpid'],
  ['personality(query)', 'personality', 0xffffffff],
  ['personality(ADDR_NO_RANDOMIZE)', 'personality', 0x0040000],
  ...['ptrace', 'mount', 'umount2', 'open_tree', 'open_tree_attr', 'move_mount', 'fsopen', 'mount_setattr']
    .concat(['bpf', 'perf_event_open', 'keyctl', 'userfaultfd', 'io_uring_setup', 'setns', 'fanotify_init'])
    .map((name): Call => [name, name, 0, 0, 0, 0, 0]),
  ...[
    'clone3',
    'openat2',
    'io_setup',
    'io_destroy',
    'io_getevents',
    'io_submit',
    'io_cancel',
    'io_pgetevents',
  ].map((name): Call => [name, name, 0, 0, 0, 0, 0]),
  ['openat(04755)', 'openat', -1, 0, O_CREAT, 0o4755],
  ['openat(0644)', 'openat', -1, 0, O_CREAT, 0o644],
  ['fchmodat(04755)', 'fchmodat', -1, 0, 0o4755],
  ['fchmodat(0644)', 'fchmodat', -1, 0, 0o644],
  ['fchmodat2(02755)', 'fchmodat2', -1, 0, 0o2755, 0],
  ['fchmodat2(0644)', 'fchmodat2', -1, 0, 0o644, 0],
  ['mknodat(S_IFREG|06000)', 'mknodat', -1, 0, S_IFREG | 0o6000, 0],
  ['mknodat(S_IFREG|0644)', 'mknodat', -1, 0, S_IFREG | 0o644, 0],
  ['fchmod(04755)', 'fchmod', -1, 0o4755],
  ['fchmod(0644)', 'fchmod', -1, 0o644],
  // x86_64's own: the generic table (arm64) has only the *at forms.
  ['open(04755)', 'open', 0, O_CREAT, 0o4755],
  ['open(0644)', 'open', 0, O_CREAT, 0o644],
  ['creat(02755)', 'creat', 0, 0o2755],
  ['creat(0644)', 'creat', 0, 0o644],
  ['chmod(04755)', 'chmod', 0, 0o4755],
  ['chmod(0644)', 'chmod', 0, 0o644],
  ['mknod(S_IFREG|04755)', 'mknod', 0, S_IFREG | 0o4755, 0],
  ['mknod(S_IFREG|0644)', 'mknod', 0, S_IFREG | 0o644, 0],
  ['unshare(CLONE_NEWUSER)', 'unshare', 0x10000000],
  // Not CLONE_NEWTIME: without capabilities the kernel says EPERM too, so it shows nothing here.
  ['unshare(CLONE_FILES)', 'unshare', 0x400],
  ['clone(CLONE_NEWUSER)', 'clone', 0x10000000 | 17, 0, 0, 0, 0],
  ['ioctl(TIOCSTI)', 'ioctl', -1, 0x5412],
  ['ioctl(TIOCSTI high bits)', 'ioctl', -1, 0x1_0000_5412],
  ['ioctl(TCGETS)', 'ioctl', -1, 0x5401],
  ['socket(AF_UNIX)', 'socket', 1, 1, 0],
  ['socket(AF_INET)', 'socket', 2, 1, 0],
  ['socket(AF_PACKET)', 'socket', 17, 3, 0],
  ['socket(AF_VSOCK)', 'socket', 40, 1, 0],
  ['socketpair(AF_UNIX)', 'socketpair', 1, 1, 0, 0],
  ['socketpair(AF_ALG)', 'socketpair', 38, 5, 0, 0],
  ['shmget', 'shmget', 0, 0, 0],
  ['semget', 'semget', 0, -1, 0],
  ['msgctl', 'msgctl', -1, 0, 0],
  ['mq_unlink', 'mq_unlink', 0],
]

const EAFNOSUPPORT = 97
/** The families a sandbox needs: AF_UNIX, AF_INET, AF_INET6, AF_NETLINK. */
const NETWORK_FAMILIES = [1, 2, 10, 16]

/**
 * Every socket family 0-63 (and one with high bits the kernel ignores), every type, through socket() and
 * socketpair(): which ones open, and the errno of each refusal. AF_VSOCK (40) opens on this kind of host
 * (a VM) and reaches the hypervisor; AF_ALG (38), AF_PACKET (17), AF_KEY (15) are kernel surface too.
 */
const familyProbe = () => `
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
opened, errnos = set(), {}
fds = (ctypes.c_int * 2)()
for fam in list(range(64)) + [0x100000028]:
    for typ in (1, 2, 3, 5):
        for call in ('socket', 'socketpair'):
            ctypes.set_errno(0)
            if call == 'socket':
                r = libc.syscall(ctypes.c_long(${nr('socket')}), ctypes.c_long(fam), ctypes.c_long(typ), ctypes.c_long(0))
                if r >= 0: libc.close(r)
            else:
                r = libc.syscall(ctypes.c_long(${nr('socketpair')}), ctypes.c_long(fam), ctypes.c_long(typ), ctypes.c_long(0), fds)
                if r == 0: libc.close(fds[0]); libc.close(fds[1])
            key = fam & 0xffffffff
            if r >= 0: opened.add(key)
            else: errnos.setdefault(str(key), set()).add(ctypes.get_errno())
print(json.dumps({'opened': sorted(opened), 'errnos': {k: sorted(v) for k, v in errnos.items()}}))
`

const bridge = probeCapabilities().bridge
const NETWORKS: [string, RunOptions['network']][] = [
  ['none', 'none'],
  ['host', 'host'],
  ['allowlist', { allow: ['example.com'] }],
]

for (const isolation of TIERS) {
  describe(`socket families (${isolation} tier)`, { skip: noFilter || skipTier(isolation) }, () => {
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
        const r = await run(['python3', '-c', familyProbe()], { isolation, network })
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
  describe(`seccomp (${isolation} tier)`, { skip: noFilter || skipTier(isolation) }, () => {
    it('the filter is installed', async () => {
      const r = await run(['grep', '-E', '^Seccomp', '/proc/self/status'], { isolation })
      assert.match(r.stdout, /Seccomp:\s+2/)
    })

    it("the kernel's verdicts are the BPF interpreter's on the same program, call by call", async () => {
      // The program this run gets, as prepare() builds it for run() with the same policy on this machine.
      const prepared = prepare(['true'], parsePolicy({ isolation }), probeCapabilities())
      if (prepared.kind !== 'launch') assert.fail(prepared.violation.message)
      const program = decode(prepared.plan.seccomp!)
      await releasePlan(prepared.plan)
      const calls = DIFFERENTIAL.filter(([, name]) => syscallNumber(name, arch!) !== undefined)
      const r = await run(['python3', '-c', probe(numbered(calls))], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      const kernel = JSON.parse(r.stdout) as Record<string, number>
      let refused = 0
      for (const [label, name, ...args] of calls) {
        const verdict = runFilter(program, { nr: nr(name), arch: AUDIT_ARCH[arch!], args })
        const got = kernel[label]!
        if (verdict === ALLOW) {
          assert.ok(![EPERM, 38, EAFNOSUPPORT].includes(got), `${label}: allowed, but the kernel said ${got}`)
        } else {
          assert.equal(verdictName(errno(got)), verdictName(verdict), label)
          refused++
        }
      }
      assert.ok(refused >= 30 && refused < calls.length, `${refused} of ${calls.length} refused`)
    })

    it('refuses each listed call with EPERM', async () => {
      const r = await run(['python3', '-c', probe(numbered(REFUSED))], {
        denySyscalls: ['socket'],
        isolation,
      })
      assert.equal(r.status, 'ok', r.stderr)
      const errnos = JSON.parse(r.stdout) as Record<string, number>
      for (const [name] of REFUSED) assert.equal(errnos[name], EPERM, name)
    })

    it('still allows what programs need: harmless personality, plain clone, ordinary ioctl', async () => {
      const allowed = numbered([
        ['personality(query)', 'personality', 0xffffffff],
        ['getpid', 'getpid'],
      ])
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
        `r = libc.syscall(ctypes.c_long(${nr('io_setup')}), ctypes.c_long(128), ctypes.byref(ctx))`,
        'print(ctypes.get_errno() if r == -1 else 0)',
        `print(ctypes.get_errno() if libc.syscall(ctypes.c_long(${nr('io_uring_setup')}), 1, ctypes.byref(ctx)) == -1 else 0)`,
      ].join('\n')
      const r = await run(['python3', '-c', code], { isolation })
      assert.equal(r.status, 'ok', r.stderr)
      assert.deepEqual(r.stdout.trim().split('\n'), ['38', String(EPERM)])
    })

    it('kills an x32 system call (the non-native ABI bypass)', {
      skip: arch === 'x86_64' ? false : 'x32 is an x86_64 ABI',
    }, async () => {
      const r = await run(
        [
          'python3',
          '-c',
          `import ctypes; ctypes.CDLL(None).syscall(0x40000000 | ${nr('getpid')}); print("alive")`,
        ],
        { isolation },
      )
      assert.equal(r.status, 'signaled')
      assert.equal(r.signal, 'SIGSYS')
      assert.equal(r.stdout, '')
    })
  })
}
