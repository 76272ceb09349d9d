// `serve`'s listener against clients that only hold connections: bounded in number, and slow headers or
// bodies are cut off by the server's timeouts.
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { describe, it } from 'node:test'
import { serve } from '../../src/service/serve.js'
import { tempDir } from '../helpers.js'

describe('serve limits', () => {
  it('holds at most maxConnections connections: the next one is closed at once', async () => {
    const server = await serve({ dataDir: tempDir('cordon-serve-limits-'), port: 0, maxConnections: 3 })
    const { hostname, port } = new URL(server.url)
    const sockets: Socket[] = []
    try {
      const open = () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect(Number(port), hostname, () => resolve(s)).on('error', reject)
          sockets.push(s)
        })
      for (let i = 0; i < 3; i++) await open()
      await new Promise((r) => setTimeout(r, 50))
      const extra = await open()
      const closed = await new Promise<boolean>((resolve) => {
        extra.once('close', () => resolve(true))
        setTimeout(() => resolve(false), 1000)
      })
      assert.ok(closed, 'a fourth idle connection is refused')
    } finally {
      for (const s of sockets) s.destroy()
      await server.close()
    }
  })
})
