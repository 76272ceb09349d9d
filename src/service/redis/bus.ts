// The control and event buses on Redis pub/sub: one connection publishes, one subscribes (a subscribed
// connection can do nothing else), per node. Pub/sub keeps nothing: a message sent while a node was
// disconnected is gone, which is why the store is the truth and both buses only hurry things along (a
// worker's heartbeat also brings its cancels; an event follower re-reads the store after a reconnect or a
// gap).
import type { Redis } from 'ioredis'
import type { ControlBus, ControlMessage, EventBus } from '../parts.js'
import type { RunEvent } from '../types.js'
import { connectRedis } from './connection.js'

/** Every channel of one deployment starts with its prefix (several may share a Redis). */
export interface BusOptions {
  prefix?: string
}

const isControl = (m: unknown): m is ControlMessage => {
  if (typeof m !== 'object' || m === null) return false
  const { type, runId, keyId } = m as Record<string, unknown>
  if (type === 'cancel' || type === 'stdin') return typeof runId === 'string'
  return type === 'revoke' && typeof keyId === 'string'
}

const isEvent = (e: unknown): e is RunEvent => {
  if (typeof e !== 'object' || e === null) return false
  const { runId, seq, type, at, data } = e as Record<string, unknown>
  return (
    typeof runId === 'string' &&
    typeof seq === 'number' &&
    typeof type === 'string' &&
    typeof at === 'string' &&
    typeof data === 'object' &&
    data !== null
  )
}

/** Both buses over two connections of one node. */
export class RedisBuses {
  readonly control: ControlBus
  readonly events: EventBus
  private readonly controlListeners = new Set<(m: ControlMessage) => void>()
  private readonly eventListeners = new Map<
    string,
    { listeners: Set<(e: RunEvent) => void>; ready: Promise<void> }
  >()
  private readonly reconnectListeners = new Set<() => void>()
  private readonly controlChannel: string
  private readonly eventPrefix: string
  private connectedOnce = false

  private constructor(
    private readonly pub: Redis,
    private readonly sub: Redis,
    prefix: string,
  ) {
    this.controlChannel = `${prefix}:ctl`
    this.eventPrefix = `${prefix}:ev:`
    sub.on('message', (channel: string, text: string) => this.deliver(channel, text))
    // ioredis subscribes again by itself after a reconnect; what was published meanwhile is lost, so
    // followers are told to read the store.
    sub.on('ready', () => {
      if (!this.connectedOnce) {
        this.connectedOnce = true
        return
      }
      for (const listener of this.reconnectListeners) listener()
    })
    sub.on('error', () => {
      // reconnects by itself; the store covers what is lost meanwhile
    })
    pub.on('error', () => undefined)
    const buses = this
    this.control = {
      async publish(message) {
        await pub.publish(buses.controlChannel, JSON.stringify(message))
      },
      subscribe(listener) {
        buses.controlListeners.add(listener)
        return () => buses.controlListeners.delete(listener)
      },
      close: () => this.close(),
    }
    this.events = {
      async publish(event) {
        await pub.publish(buses.eventPrefix + event.runId, JSON.stringify(event))
      },
      subscribe: (runId, listener) => this.subscribeEvents(runId, listener),
      onReconnect(listener) {
        buses.reconnectListeners.add(listener)
        return () => buses.reconnectListeners.delete(listener)
      },
      close: () => this.close(),
    }
  }

  static async open(url: string, { prefix = 'cordon' }: BusOptions = {}): Promise<RedisBuses> {
    const pub = await connectRedis(url, `${prefix}-pub`)
    const sub = await connectRedis(url, `${prefix}-sub`)
    const buses = new RedisBuses(pub, sub, prefix)
    await sub.subscribe(buses.controlChannel)
    buses.connectedOnce = true
    return buses
  }

  private deliver(channel: string, text: string): void {
    let message: unknown
    try {
      message = JSON.parse(text)
    } catch {
      return // not ours
    }
    if (channel === this.controlChannel) {
      if (!isControl(message)) return
      for (const listener of this.controlListeners) safely(() => listener(message))
      return
    }
    if (!channel.startsWith(this.eventPrefix) || !isEvent(message)) return
    const runId = channel.slice(this.eventPrefix.length)
    if (message.runId !== runId) return
    for (const listener of this.eventListeners.get(runId)?.listeners ?? []) safely(() => listener(message))
  }

  private async subscribeEvents(runId: string, listener: (e: RunEvent) => void): Promise<() => void> {
    let entry = this.eventListeners.get(runId)
    if (!entry) {
      // Every subscriber of the run waits for the one SUBSCRIBE: an event is delivered only after it.
      entry = {
        listeners: new Set(),
        ready: this.sub.subscribe(this.eventPrefix + runId).then(() => undefined),
      }
      this.eventListeners.set(runId, entry)
    }
    entry.listeners.add(listener)
    await entry.ready
    return () => {
      const now = this.eventListeners.get(runId)
      if (!now?.listeners.delete(listener) || now.listeners.size > 0) return
      this.eventListeners.delete(runId)
      void this.sub.unsubscribe(this.eventPrefix + runId).catch(() => undefined)
    }
  }

  private closed = false
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.controlListeners.clear()
    this.eventListeners.clear()
    this.reconnectListeners.clear()
    this.sub.disconnect()
    await this.pub.quit().catch(() => this.pub.disconnect())
  }
}

function safely(f: () => void): void {
  try {
    f()
  } catch {
    // a listener's failure is its own
  }
}
