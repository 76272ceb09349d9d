import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { boundSockets, hostSockets } from '../../src/host/sockets.js'
import { asUnprivileged, notRoot, noUnprivileged, tempDir } from '../helpers.js'

const PROC_NET_UNIX = `Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 12345 /run/dbus/system_bus_socket
0000000000000000: 00000002 00000000 00000000 0002 01    46 /run/systemd/journal/dev-log
0000000000000000: 00000003 00000000 00000000 0001 03 12347 /run/dbus/system_bus_socket
0000000000000000: 00000002 00000000 00010000 0001 01 12348 @/tmp/.X11-unix/X0
0000000000000000: 00000002 00000000 00000000 0001 03 12349
0000000000000000: 00000002 00000000 00010000 0005 01 12350 /var/lib/a dir/with space.sock
0000000000000000: 00000002 00000000 00010000 0001 01 12351 relative.sock
0000000000000000: 00000002 00000000 00000000 0001 03 12352 /var/lib/client-bound.sock
`

describe('boundSockets', () => {
  it('lists listening and datagram pathname sockets once each, spaces kept; not abstract, relative or client ones', () => {
    assert.deepEqual(boundSockets(PROC_NET_UNIX), [
      '/run/dbus/system_bus_socket',
      '/run/systemd/journal/dev-log',
      '/var/lib/a dir/with space.sock',
    ])
  })
})

describe('hostSockets', () => {
  it("finds a socket this process listens on, by its directory's real path; never follows its last component", async () => {
    const dir = realpathSync(tempDir('cordon-sockets-'))
    const link = path.join(dir, 'link')
    symlinkSync(dir, link)
    const server = net.createServer()
    // Listed under a name through a symlinked directory: covered at its real path.
    await new Promise<void>((r) => server.listen(path.join(link, 's.sock'), r))
    // A listening name that then became a symlink to a file: never covered (nor its target).
    const decoy = net.createServer()
    await new Promise<void>((r) => decoy.listen(path.join(dir, 'decoy.sock'), r))
    const { rmSync } = await import('node:fs')
    rmSync(path.join(dir, 'decoy.sock'))
    symlinkSync('/etc/hostname', path.join(dir, 'decoy.sock'))
    try {
      const found = hostSockets()
      assert.ok(found.includes(path.join(dir, 's.sock')), found.join(' '))
      assert.ok(!found.some((p) => p.startsWith(link)), 'by its real path')
      assert.ok(!found.includes(path.join(dir, 'decoy.sock')) && !found.includes('/etc/hostname'))
    } finally {
      server.close()
      decoy.close()
    }
  })

  it("passes over a socket in a directory the caller cannot search: another user's is not a failed run", {
    skip: notRoot || noUnprivileged(),
  }, async () => {
    // Root's proxy sockets sit in 0700 directories under /tmp: the directory resolves, its entries do not.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'cordon-sockets-locked-'))
    chmodSync(dir, 0o700)
    const server = net.createServer()
    await new Promise<void>((r) => server.listen(path.join(dir, 'root.sock'), r))
    try {
      const out = await asUnprivileged<{ status: string }>(`
        const r = await run(['true'], { isolation: 'namespace' })
        return { status: r.status }`)
      assert.equal(out.status, 'ok')
    } finally {
      server.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
