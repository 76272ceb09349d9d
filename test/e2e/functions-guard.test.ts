// A called function's subprocess must not forge its reply: the operator's function is trusted to return its
// own value, but what it starts (a student's program under a grader) is not, and runs as the same uid in
// the same sandbox. The forger below tries every way we know to reach the reply channel and the nonce.
import assert from 'node:assert/strict'
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import type { RunOptions } from '../../src/index.js'
import { callFunction, openSpawner, probeCapabilities } from '../../src/index.js'
import { asUnprivileged, noNamespace, noSpawner, noUnprivileged, skipTier, TIERS } from '../helpers.js'

const PYTHON = '/usr/bin/python3'
const noPython = existsSync(PYTHON) ? false : `${PYTHON} is not installed`

// Outside /tmp (private in the sandbox), readable by the sandbox uid.
const dir = mkdtempSync('/var/tmp/cordon-guard-')
chmodSync(dir, 0o755)
after(() => rmSync(dir, { recursive: true, force: true }))

/**
 * The forger, run by the function as its child. argv[1]: a reply frame (hex) claiming 999, with 36 'N's where
 * the nonce goes. It looks for the nonce in its parent's (the runner's) memory, then writes one frame per
 * candidate through every route to the reply channel, and prints what each route did as one JSON line.
 * Last it wakes the runner's inspector (SIGUSR1) and, through it, has the runner itself write the forged
 * frames and close fd 8 before its own reply.
 */
const FORGER = String.raw`
import base64, ctypes, errno, json, os, re, signal, socket, struct, sys, time, urllib.request
ppid = os.getppid()
template = bytes.fromhex(sys.argv[1])
UUID = re.compile(rb'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
report = {}
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))

# The nonce: a UUID string in the V8 heap. Every UUID in every readable anonymous mapping is a candidate
# (the process tier's TMPDIR holds one too): one forged frame each.
nonces = set()
try:
    with open('/proc/%d/maps' % ppid) as maps, open('/proc/%d/mem' % ppid, 'rb', 0) as mem:
        for line in maps:
            fields = line.split()
            label = fields[5] if len(fields) > 5 else ''
            if fields[1][0] != 'r' or label.startswith('/') or label in ('[vvar]', '[vsyscall]', '[vvar_vclock]'):
                continue
            lo, hi = (int(x, 16) for x in fields[0].split('-'))
            at, tail = lo, b''
            while at < hi:
                size = min(8 << 20, hi - at)
                try:
                    mem.seek(at)
                    chunk = tail + mem.read(size)
                except (OSError, OverflowError, ValueError):
                    break
                nonces.update(UUID.findall(chunk))
                tail = chunk[-64:]
                at += size
    report['memory'] = 'found' if nonces else 'no uuid found'
except OSError as e:
    report['memory'] = name(e)
frames = [template.replace(b'N' * 36, n) for n in sorted(nonces)] or [template]

def forge(route, open_fd):
    try:
        fd = open_fd()
    except OSError as e:
        report[route] = name(e)
        return
    try:
        for f in frames:
            os.write(fd, f)
        report[route] = 'wrote'
    except OSError as e:
        report[route] = 'write ' + name(e)

libc = ctypes.CDLL(None, use_errno=True)
def pidfd_getfd(pid, target):
    pidfd = os.pidfd_open(pid)
    try:
        fd = libc.syscall(438, pidfd, target, 0)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return fd
    finally:
        os.close(pidfd)

def opened(p):
    return os.open(p, os.O_WRONLY)

forge('inherited', lambda: os.dup(8))
forge('procfd', lambda: opened('/proc/%d/fd/8' % ppid))
forge('pidfd', lambda: pidfd_getfd(ppid, 8))
# The request, which carried the nonce and the arguments: inherited or through the runner.
for route, get in (('request', lambda: os.dup(7)), ('requestPidfd', lambda: pidfd_getfd(ppid, 7))):
    try:
        get()
        report[route] = 'opened'
    except OSError as e:
        report[route] = name(e)
# Any other process of the sandbox that holds the channel (bwrap's init, the network bridge).
others = []
for entry in os.listdir('/proc'):
    if not entry.isdigit() or int(entry) in (os.getpid(), ppid):
        continue
    for target in (7, 8):
        try:
            fd = pidfd_getfd(int(entry), target)
        except OSError:
            continue
        others.append('%s:%d' % (entry, target))
        if target == 8:
            try:
                for f in frames:
                    os.write(fd, f)
            except OSError:
                pass
report['others'] = others

# Node opens its inspector on 127.0.0.1:9229 at SIGUSR1, from any process that may signal it.
def inspector():
    os.kill(ppid, signal.SIGUSR1)
    url = None
    for _ in range(40):
        try:
            url = json.load(urllib.request.urlopen('http://127.0.0.1:9229/json/list', timeout=1))[0]['webSocketDebuggerUrl']
            break
        except Exception as e:
            last = e
            time.sleep(0.05)
    if not url:
        return 'no inspector: %r' % last
    host, path = url[len('ws://'):].split('/', 1)
    sock = socket.create_connection(tuple(host.split(':')[:1]) + (int(host.split(':')[1]),))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(('GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                  'Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n' % (path, host, key)).encode())
    head = b''
    while b'\r\n\r\n' not in head:
        head += sock.recv(1)
    code = '''(async () => {
      if (process.pid !== PPID) return 'not the runner'
      const v8 = process.getBuiltinModule('v8'), fs = process.getBuiltinModule('fs')
      let heap = ''
      for await (const c of v8.getHeapSnapshot()) heap += c
      const found = new Set(heap.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g))
      const template = Buffer.from(TEMPLATE, 'hex')
      for (const nonce of found) {
        const f = Buffer.from(template)
        for (let at = f.indexOf('N'.repeat(36)); at >= 0; at = f.indexOf('N'.repeat(36), at)) f.write(nonce, at, 'latin1')
        fs.writeSync(8, f)
      }
      fs.closeSync(8) // so that the runner's own reply goes nowhere
      return found.size
    })()'''.replace('TEMPLATE', json.dumps(template.hex())).replace('PPID', str(ppid))
    data = json.dumps({'id': 1, 'method': 'Runtime.evaluate', 'params': {'expression': code, 'awaitPromise': True}}).encode()
    mask = os.urandom(4)
    size = bytes([0x80 | 126]) + struct.pack('>H', len(data)) if len(data) < 65536 else bytes([0x80 | 127]) + struct.pack('>Q', len(data))
    sock.sendall(b'\x81' + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
    reply = b''
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
        if b'"id":1' in reply:
            return 'evaluated'
    return 'no answer'

try:
    report['inspector'] = inspector()
except Exception as e:
    report['inspector'] = 'failed: %r' % e
print(json.dumps(report))
`

const mod = path.join(dir, 'grader.mjs')
writeFileSync(
  mod,
  `import { execFile } from 'node:child_process'
import { serialize } from 'node:v8'
// Waits for the forger without blocking its event loop, as a grader would (and as the inspector needs).
export async function grade(forger, ...args) {
  const body = serialize({ nonce: 'N'.repeat(36), kind: 'value', value: 999 })
  const head = Buffer.alloc(4)
  head.writeUInt32BE(body.length)
  // A frame as the runner writes it: the nonce, the length, the payload (which holds the nonce too).
  const argv = ['-c', forger, Buffer.concat([Buffer.from('N'.repeat(36)), head, body]).toString('hex')]
  const r = await new Promise((resolve) =>
    execFile(${JSON.stringify(PYTHON)}, argv, { encoding: 'utf8' }, (error, stdout, stderr) => resolve({ stdout, stderr })),
  )
  process.stdout.write(r.stdout)
  process.stderr.write(r.stderr)
  return 1
}
`,
)

// A function that itself writes frames carrying the nonce (its own heap holds it): two replies.
writeFileSync(
  path.join(dir, 'twice.mjs'),
  `import { writeSync } from 'node:fs'
import { getHeapSnapshot, serialize } from 'node:v8'
export async function twice() {
  let heap = ''
  for await (const chunk of getHeapSnapshot()) heap += chunk
  const found = new Set(heap.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g))
  for (const nonce of found) {
    const body = serialize({ nonce, kind: 'value', value: 999 })
    const head = Buffer.alloc(4)
    head.writeUInt32BE(body.length)
    writeSync(8, Buffer.concat([Buffer.from(nonce), head, body]))
  }
  return found.size
}
`,
)

interface Report {
  inspector: string
  memory: string
  inherited: string
  procfd: string
  pidfd: string
  request: string
  requestPidfd: string
  others: string[]
}

/** The call's value and status, and the forger's report (null when the runner died before relaying it). */
async function attack(
  options: RunOptions,
): Promise<{ value: unknown; status: string; report: Report | null; result: string }> {
  const r = await callFunction(mod, 'grade', [FORGER], options)
  let report: Report | null = null
  try {
    report = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as Report
  } catch {
    // reported by the caller
  }
  return { value: r.value, status: r.status, report, result: JSON.stringify(r) }
}

/** What a subprocess may see when it reaches for the runner's channel or memory: nothing but refusals. */
function assertRefused(report: Report | null, result: string): asserts report is Report {
  assert.ok(report, `the forger printed no report: ${result}`)
  // ENOENT: as root the process tier's own /proc (hidepid=invisible) does not show the guarded runner at all.
  const refused = /^(EBADF|EACCES|EPERM|ENXIO|ESRCH|ENOENT)$/
  assert.match(report.memory, refused, `the runner's memory: ${JSON.stringify(report)}`)
  for (const route of ['inherited', 'procfd', 'pidfd', 'request', 'requestPidfd'] as const) {
    assert.match(report[route], refused, `${route}: ${JSON.stringify(report)}`)
  }
  assert.deepEqual(report.others, [], 'no other process of the sandbox holds the request or the reply')
  assert.match(report.inspector, /^no inspector/, `the runner's inspector: ${JSON.stringify(report)}`)
}

/** The call returned the function's own value, and every route the forger tried was refused. */
async function assertNotForged(options: RunOptions): Promise<void> {
  const { value, status, report, result } = await attack(options)
  assert.equal(value, 1, result)
  assert.equal(status, 'ok', result)
  assertRefused(report, result)
}

for (const tier of TIERS) {
  describe(`a called function's subprocess cannot forge its reply (${tier} tier)`, {
    skip: skipTier(tier) || noPython,
  }, () => {
    it('not through the inherited fd, the runner’s /proc fd, pidfd_getfd, its memory or its inspector', async () => {
      await assertNotForged({ isolation: tier })
    })

    it('nor when the sandbox was started through a spawner', { skip: noSpawner }, async () => {
      const spawner = await openSpawner()
      try {
        await assertNotForged({ isolation: tier, spawner })
      } finally {
        await spawner.close()
      }
    })

    if (tier === 'process') {
      // With the host's network the runner's inspector would listen on the host's loopback (without it,
      // this tier refuses TCP sockets and no inspector can start).
      it("nor with the host's network", async () => {
        await assertNotForged({ isolation: tier, network: 'host' })
      })
    }
  })
}

describe('the network bridge holds no end of the call channel', {
  skip:
    noNamespace || noPython || (probeCapabilities().bridge ? false : "cordon's network bridge is not built"),
}, () => {
  it("a subprocess finds neither the request nor the reply in the bridge's relay", async () => {
    await assertNotForged({ isolation: 'namespace', network: { allow: ['localhost'], allowLoopback: true } })
  })
})

describe('the reply the host takes', () => {
  for (const tier of TIERS) {
    it(`two replies carrying the nonce: an error, neither value is taken (${tier} tier)`, {
      skip: skipTier(tier),
    }, async () => {
      const r = await callFunction(path.join(dir, 'twice.mjs'), 'twice', [], { isolation: tier })
      assert.equal(r.status, 'error', JSON.stringify(r))
      assert.equal(r.violation?.limit, 'reply')
      assert.match(r.violation!.message, /more than one reply/)
      assert.equal('value' in r, false)
    })
  }

  it('a runner that cannot load its guard does not call the function: an error naming the guard', {
    skip: skipTier('namespace') && skipTier('process'),
  }, async () => {
    const isolation = skipTier('namespace') ? 'process' : 'namespace'
    // --no-addons stands for every way loading can fail (not built, wrong C library, not shown).
    const r = await callFunction(mod, 'grade', [FORGER], { isolation, env: { NODE_OPTIONS: '--no-addons' } })
    assert.equal(r.status, 'error', JSON.stringify(r))
    assert.equal(r.violation?.limit, 'guard')
    assert.match(r.violation!.message, /not called.*cordon-guard\.node/s)
    assert.equal(r.stdout, '', 'the function never ran: no forger report')
    assert.equal('value' in r, false)
  })
})

describe('a runner with an open inspector', { skip: noNamespace }, () => {
  it('does not call the function: an error naming the inspector', async () => {
    // --inspect in the policy's NODE_OPTIONS opens it before the runner runs (port 0: any free one).
    const r = await callFunction(mod, 'grade', [FORGER], {
      isolation: 'namespace',
      env: { NODE_OPTIONS: '--inspect=127.0.0.1:0' },
    })
    assert.equal(r.status, 'error', JSON.stringify(r))
    assert.equal(r.violation?.limit, 'guard')
    assert.match(r.violation!.message, /not called.*open inspector/s)
    assert.equal(r.stdout, '', 'the function never ran: no forger report')
  })
})

describe('an unprivileged host: the sandbox has its uid', { skip: noUnprivileged() || noPython }, () => {
  it('a subprocess still cannot forge the reply, in either tier', async () => {
    const library = new URL('../../dist/index.js', import.meta.url).href
    const body = `const { callFunction } = await import(${JSON.stringify(library)})
      const out = {}
      for (const isolation of ${JSON.stringify(TIERS.filter((t) => !skipTier(t)))}) {
        out[isolation] = await callFunction(${JSON.stringify(mod)}, 'grade', [${JSON.stringify(FORGER)}], { isolation })
      }
      return out`
    const results = await asUnprivileged<Record<string, { status: string; value: unknown; stdout: string }>>(
      body,
      60_000,
    )
    assert.ok(Object.keys(results).length > 0, 'at least one tier ran')
    for (const [tier, r] of Object.entries(results)) {
      const result = `${tier}: ${JSON.stringify(r)}`
      assert.equal(r.value, 1, result)
      let report: Report | null = null
      try {
        report = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as Report
      } catch {
        // asserted next
      }
      assertRefused(report, result)
    }
  })
})
