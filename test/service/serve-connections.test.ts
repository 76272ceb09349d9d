// `serve`'s connections against clients that only hold them, with real sockets: idle connections reopened
// as fast as they are dropped never keep a probe out, one address holds at most its share, a connection
// being answered (an event stream) is never the one pushed out, and one that sends nothing is closed at
// the header timeout.
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { networkInterfaces } from 'node:os'
import { describe, it } from 'node:test'
import { addressGroup } from '../../src/service/connections.js'
import { serve } from '../../src/service/serve.js'
import { createService } from '../../src/service/service.js'
import { noNamespace, tempDir, waitFor } from '../helpers.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** This machine's first IPv4 address that is not loopback: another source address to connect from. */
const otherAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address
const noOther = otherAddress ? false : 'this machine has no IPv4 address but loopback'

/**
 * A client that holds `n` idle connections to host:port from `from`, each opened again once dropped
 * (unless `reopen` is false).
 */
function holder(host: string, port: number, n: number, from?: string, reopen = true) {
  const open = new Set<Socket>()
  let stopped = false
  let opened = 0
  const one = () => {
    if (stopped) return
    opened++
    const s = connect({ host, port, ...(from ? { localAddress: from } : {}) })
    open.add(s)
    // Read (and drop) what comes, so that a close by the server is seen.
    s.on('data', () => {})
    s.on('error', () => {})
    s.on('close', () => {
      open.delete(s)
      if (reopen) setImmediate(one)
    })
  }
  for (let i = 0; i < n; i++) one()
  return {
    /** Sockets connected and not closed. */
    alive: () => [...open].filter((s) => !s.connecting && !s.destroyed).length,
    opened: () => opened,
    stop() {
      stopped = true
      for (const s of open) s.destroy()
    },
  }
}

/** GET /healthz on a connection of its own; true when answered 200 within `ms`. */
async function probe(url: string, ms = 5000): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, {
      signal: AbortSignal.timeout(ms),
      headers: { connection: 'close' },
    })
    return res.status === 200
  } catch {
    return false
  }
}

describe('serve: connections', () => {
  it('answers every probe while idle connections, reopened as soon as dropped, try to hold every slot', async () => {
    // 1 024 idle connections held every slot; 0 of 23 /healthz probes were answered in 45 s.
    const server = await serve({
      dataDir: tempDir('cordon-conn-flood-'),
      port: 0,
      maxConnections: 64,
      maxConnectionsPerAddress: 16,
    })
    const { hostname, port } = new URL(server.url)
    const flood = holder(hostname, Number(port), 96)
    try {
      await sleep(500)
      let answered = 0
      for (let i = 0; i < 10; i++) if (await probe(server.url)) answered++
      assert.equal(answered, 10, `${answered} of 10 probes answered (${flood.opened()} connections opened)`)
    } finally {
      flood.stop()
      await server.close()
    }
  })

  it('holds at most its share of connections from one address; another address keeps its own', {
    skip: noOther,
  }, async () => {
    const server = await serve({
      dataDir: tempDir('cordon-conn-share-'),
      host: '0.0.0.0',
      port: 0,
      maxConnections: 64,
      maxConnectionsPerAddress: 16,
    })
    const port = Number(new URL(server.url).port)
    const mine = holder('127.0.0.1', port, 10)
    // 80 connections from another address, not reopened: past its share, each pushes out its oldest;
    // and 40 more that reopen as soon as dropped, for a while.
    const flood = holder(otherAddress as string, port, 80, otherAddress, false)
    const churn = holder(otherAddress as string, port, 40, otherAddress)
    try {
      await sleep(1000)
      churn.stop()
      assert.ok(await waitFor(() => flood.alive() <= 16, 3000), `the flood holds ${flood.alive()}`)
      // The flood's connections pushed out each other, never the loopback's.
      assert.equal(mine.alive(), 10)
      assert.ok(
        await probe(`http://${otherAddress}:${port}`),
        'the flooding address itself is still answered',
      )
    } finally {
      mine.stop()
      flood.stop()
      churn.stop()
      await server.close()
    }
  })

  it('never pushes out a connection being answered (an event stream)', { skip: noNamespace }, async () => {
    const dataDir = tempDir('cordon-conn-busy-')
    const made = await createService({ dataDir })
    const key = made.adminKey as string
    await made.service.close()
    const server = await serve({ dataDir, port: 0, maxConnections: 8, maxConnectionsPerAddress: 8 })
    const { hostname, port } = new URL(server.url)
    const auth = { authorization: `Bearer ${key}` }
    let flood: ReturnType<typeof holder> | undefined
    try {
      const run = (await (
        await fetch(`${server.url}/v1/runs`, {
          method: 'POST',
          headers: auth,
          body: JSON.stringify({ cmd: ['sh', '-c', 'echo first; sleep 3; echo second'] }),
        })
      ).json()) as { id: string }
      const stream = await fetch(`${server.url}/v1/runs/${run.id}/events?encoding=base64`, { headers: auth })
      const reader = (stream.body as ReadableStream<Uint8Array>).getReader()
      let text = ''
      const all = (async () => {
        for (;;) {
          const { done, value } = await reader.read()
          if (done) return
          text += Buffer.from(value).toString()
        }
      })()
      flood = holder(hostname, Number(port), 40)
      await all
      assert.match(text, /event: end/, 'the stream ran to its end')
      const outputs = [...text.matchAll(/"data":"([^"]+)"/g)].map((m) =>
        Buffer.from(m[1] as string, 'base64'),
      )
      assert.equal(Buffer.concat(outputs).toString(), 'first\nsecond\n')
    } finally {
      flood?.stop()
      await server.close()
    }
  })

  it('closes a new connection at once when every one held is being answered', {
    skip: noNamespace,
  }, async () => {
    const dataDir = tempDir('cordon-conn-full-')
    const made = await createService({ dataDir })
    const key = made.adminKey as string
    await made.service.close()
    const server = await serve({ dataDir, port: 0, maxConnections: 3 })
    const { hostname, port } = new URL(server.url)
    const auth = { authorization: `Bearer ${key}` }
    const polls: Socket[] = []
    try {
      const run = (await (
        await fetch(`${server.url}/v1/runs`, {
          method: 'POST',
          headers: { ...auth, connection: 'close' },
          body: JSON.stringify({ cmd: ['sleep', '30'] }),
        })
      ).json()) as { id: string }
      // Three long polls: three connections being answered.
      for (let i = 0; i < 3; i++) {
        const s = connect(Number(port), hostname)
        s.on('data', () => {})
        s.on('error', () => {})
        s.write(
          `GET /v1/runs/${run.id}?wait=30s HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\n\r\n`,
        )
        polls.push(s)
      }
      await sleep(500)
      const closed = await new Promise<boolean>((resolve) => {
        const s = connect(Number(port), hostname)
        s.on('data', () => {})
        s.on('error', () => {})
        s.on('close', () => resolve(true))
        setTimeout(() => {
          s.destroy()
          resolve(false)
        }, 2000)
      })
      assert.ok(closed, 'the new connection was closed')
      assert.ok(
        polls.every((s) => !s.destroyed),
        'the long polls were kept',
      )
      for (const s of polls) s.destroy()
      await sleep(200)
      await fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: 'POST', headers: auth })
    } finally {
      for (const s of polls) s.destroy()
      await server.close()
    }
  })

  it('closes a connection that sends no whole request within the header timeout', async () => {
    const server = await serve({ dataDir: tempDir('cordon-conn-idle-'), port: 0, headersTimeoutMs: 1000 })
    const { hostname, port } = new URL(server.url)
    const closedAfter = (write: string) =>
      new Promise<number>((resolve) => {
        const start = Date.now()
        const s = connect(Number(port), hostname, () => {
          if (write) s.write(write)
        })
        s.on('data', () => {})
        s.on('error', () => {})
        s.on('close', () => resolve(Date.now() - start))
        setTimeout(() => {
          s.destroy()
          resolve(Number.POSITIVE_INFINITY)
        }, 15_000)
      })
    try {
      const [idle, partial] = await Promise.all([
        closedAfter(''),
        closedAfter('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n'),
      ])
      assert.ok(idle < 5000, `a connection that sent nothing was closed after ${idle} ms`)
      assert.ok(partial < 5000, `a connection that sent half a request was closed after ${partial} ms`)
    } finally {
      await server.close()
    }
  })
})

describe('addressGroup', () => {
  it('counts the loopback as one, IPv4 by address, IPv6 by /64', () => {
    assert.equal(addressGroup('127.0.0.1'), 'loopback')
    assert.equal(addressGroup('127.3.2.1'), 'loopback')
    assert.equal(addressGroup('::1'), 'loopback')
    assert.equal(addressGroup('::ffff:127.0.0.5'), 'loopback')
    assert.equal(addressGroup('::ffff:10.1.2.3'), '10.1.2.3')
    assert.equal(addressGroup('10.1.2.3'), '10.1.2.3')
    assert.equal(addressGroup('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
    assert.equal(addressGroup('2001:DB8:1:2:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64')
    assert.equal(addressGroup('2001:db8::1'), '2001:db8:0:0::/64')
    assert.equal(addressGroup('fe80::1'), 'fe80:0:0:0::/64')
    assert.equal(addressGroup(undefined), 'unknown')
  })
})
