// The connections `cordon serve` holds, bounded so that no client takes every slot. Each connection is a
// socket and its buffers here, key or no key: at most `max` at once, and at most `perAddress` from one
// address (one IPv4 address, one IPv6 /64, or the loopback as a whole, 127/8 and ::1 being any local
// program's to pick). A connection that has not sent a whole request (a new one, one idle between
// requests, one still sending its body) holds its slot only until someone needs it: past a bound, a new
// connection takes the slot of the oldest such connection (of its own address, or, the server being full,
// of the address holding the most), and only when every connection is being answered is the new one
// closed. So 1 024 idle connections, reopened as fast as they are dropped, once held every slot, and no
// probe was answered in 45 s; now they only push each other out. (Node's headersTimeout and
// requestTimeout close them in time as well: serve.ts.)
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { isIPv4, isIPv6, type Socket } from 'node:net'

export const DEFAULT_MAX_CONNECTIONS = 1024
/** A quarter of the slots: a proxy in front holding more asks for more (`--max-connections-per-address`). */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256

interface Held {
  socket: Socket
  group: string
  /** The request being read or answered on it, if any. */
  request: IncomingMessage | null
}

/**
 * The group a remote address counts in: the loopback as one (the whole of 127/8 and ::1 reach it), an
 * IPv4 address (IPv4-mapped IPv6 as IPv4), an IPv6 address's /64 (one host usually has all of it).
 */
export function addressGroup(address: string | undefined): string {
  if (!address) return 'unknown'
  let a = address.toLowerCase()
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a)
  if (mapped) a = mapped[1] as string
  if (isIPv4(a)) return a.startsWith('127.') ? 'loopback' : a
  if (!isIPv6(a)) return a
  if (a === '::1') return 'loopback'
  // The first four groups of the full form.
  const [head = '', tail = ''] = a.split('::')
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const full = a.includes('::')
    ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    : left
  return `${full
    .slice(0, 4)
    .map((g) => Number.parseInt(g || '0', 16).toString(16))
    .join(':')}::/64`
}

export interface ConnectionLimits {
  max?: number
  perAddress?: number
}

/** Bounds `server`'s connections (call before it accepts any). Returns how many it holds, for tests. */
export function limitConnections(server: Server, limits: ConnectionLimits = {}): { readonly size: number } {
  const max = limits.max ?? DEFAULT_MAX_CONNECTIONS
  const perAddress = Math.min(limits.perAddress ?? DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, max)
  // Insertion order is age: the oldest first.
  const held = new Map<Socket, Held>()
  const byGroup = new Map<string, Set<Held>>()

  /** 0: no request on it (new, or idle between requests); 1: its request not wholly sent; 2: answering. */
  const busy = (h: Held) => (h.request === null ? 0 : h.request.complete ? 2 : 1)
  /** The oldest connection of `among` that has not sent a whole request, idle ones first. */
  const victim = (among: Iterable<Held>): Held | null => {
    let best: Held | null = null
    for (const h of among) {
      const b = busy(h)
      if (b === 2) continue
      if (b === 0) return h
      best ??= h
    }
    return best
  }
  const forget = (h: Held) => {
    held.delete(h.socket)
    const group = byGroup.get(h.group)
    group?.delete(h)
    if (group?.size === 0) byGroup.delete(h.group)
  }

  server.on('connection', (socket: Socket) => {
    const group = addressGroup(socket.remoteAddress)
    const mine = byGroup.get(group)
    let out: Held | null = null
    if ((mine?.size ?? 0) >= perAddress) {
      out = victim(mine ?? [])
      if (!out) return void socket.destroy()
    } else if (held.size >= max) {
      // The address holding the most gives up a slot: a flood from one address pushes out its own.
      const groups = [...byGroup.values()].sort((a, b) => b.size - a.size)
      for (const g of groups) {
        out = victim(g)
        if (out) break
      }
      if (!out) return void socket.destroy()
    }
    if (out) {
      forget(out)
      out.socket.destroy()
    }
    const h: Held = { socket, group, request: null }
    held.set(socket, h)
    let set = byGroup.get(group)
    if (!set) {
      set = new Set()
      byGroup.set(group, set)
    }
    set.add(h)
    socket.once('close', () => forget(h))
  })

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const h = held.get(req.socket)
    if (!h) return
    h.request = req
    const done = () => {
      if (h.request === req) h.request = null
    }
    res.once('finish', done)
    res.once('close', done)
  })

  return {
    get size() {
      return held.size
    },
  }
}
