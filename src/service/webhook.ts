// Webhooks: a finished run POSTed to the URL its request named, signed with the key's webhookSecret.
// The URL is a client's, so the server connecting to it is the classic SSRF: it is refused when it names
// a loopback, private, link-local or metadata address in any spelling (WHATWG URL parsing turns
// `2130706433`, `0x7f.1`, `0177.0.0.1` into 127.0.0.1; classifyAddress judges every IPv6 spelling and
// v4-mapped ones as the IPv4 address), `localhost` or a name under it, and, at delivery, a name that
// resolves to such an address: every address is checked, and the connection is made to exactly the
// addresses checked (no second lookup a rebinding DNS server could answer differently). Redirects are
// not followed.
import { createHmac, timingSafeEqual } from 'node:crypto'
import dns from 'node:dns'
import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import { classifyAddress } from '../index.js'
import { type PendingWebhook, ServiceError, type WebhookAttempt } from './types.js'

export const SIGNATURE_HEADER = 'Cordon-Signature'

const hmac = (secret: string, t: number, body: string) =>
  createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the timestamp is signed, so a replay is dated. */
export function signWebhook(secret: string, body: string, t: number = Math.floor(Date.now() / 1000)): string {
  return `t=${t},v1=${hmac(secret, t, body)}`
}

/**
 * Whether `header` signs `body` with `secret`, made within `toleranceS` of `now` (unix seconds). Any of
 * several `v1=` may match (a secret being rotated). Compared in constant time.
 */
export function verifyWebhook(
  secret: string,
  body: string,
  header: string,
  { now = Math.floor(Date.now() / 1000), toleranceS = 300 }: { now?: number; toleranceS?: number } = {},
): boolean {
  let t: number | null = null
  const signatures: string[] = []
  for (const part of header.split(',')) {
    const [k, v] = part.trim().split('=', 2)
    if (k === 't' && v && /^\d{1,15}$/.test(v)) t = Number(v)
    else if (k === 'v1' && v && /^[0-9a-f]{64}$/.test(v)) signatures.push(v)
  }
  if (t === null || Math.abs(now - t) > toleranceS) return false
  const expected = Buffer.from(hmac(secret, t, body), 'hex')
  return signatures.some((s) => timingSafeEqual(Buffer.from(s, 'hex'), expected))
}

export interface WebhookTargetOptions {
  /** Let the target be loopback or private (a server whose webhooks go to its own network; tests); never
   * a cloud metadata endpoint, which would hand a tenant the host's credentials. */
  allowPrivate?: boolean
}

const refuse = (message: string) => new ServiceError('invalid', `webhook.url: ${message}`, 'webhook.url')

/** Whether an address (as text) may be connected to. */
function addressAllowed(address: string, allowPrivate: boolean): boolean {
  const kind = classifyAddress(address)
  // An address the strict parser does not read (a zone id, say) is refused, never guessed at.
  return kind === 'public' || (kind !== null && kind !== 'metadata' && allowPrivate)
}

/**
 * The URL, parsed, when it may be a webhook target as written: http(s), no credentials, not an address
 * or a name of the host itself or a private network. Throws ServiceError('invalid', naming webhook.url).
 * A name is judged again, by what it resolves to, at delivery.
 */
export function checkWebhookUrl(url: string, { allowPrivate = false }: WebhookTargetOptions = {}): URL {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw refuse('is not a URL')
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw refuse('must be http or https')
  if (parsed.username || parsed.password) throw refuse('must not carry credentials')
  // WHATWG parsing has made every IPv4 spelling dotted-quad and kept IPv6 in brackets.
  const host = parsed.hostname
  const kind = classifyAddress(host)
  if (kind !== null) {
    if (kind === 'metadata' || (kind !== 'public' && !allowPrivate))
      throw refuse(`${host} is a ${kind} address`)
    return parsed
  }
  if (host.startsWith('[')) throw refuse(`${host} is not an address cordon can judge`)
  const name = host.replace(/\.+$/, '').toLowerCase()
  // RFC 6761: localhost and every name under it are the host itself, whatever a resolver says.
  if (!allowPrivate && (name === 'localhost' || name.endsWith('.localhost')))
    throw refuse(`${host} is the host itself`)
  return parsed
}

export interface DeliverOptions extends WebhookTargetOptions {
  /**
   * Called with each attempt as it ends, and what comes next: the next attempt and when, or null when the
   * delivery is over. The service records both at once, so a restarted server resumes where it was.
   */
  onAttempt?: (attempt: WebhookAttempt, next: PendingWebhook | null) => void
  /** Tries in all (default 5). */
  attempts?: number
  /** The attempt to start at (default 1): a delivery resumed after a restart. */
  firstAttempt?: number
  /** Milliseconds to wait before the first try (default 0): a resumed delivery's retry not yet due. */
  delayMs?: number
  /** Milliseconds to wait before try n+1, given n (default 1s, 2s, 4s… capped at 1 min). */
  backoff?: (attempt: number) => number
  /** Per try (default 10s). */
  timeoutMs?: number
  /** Stops waiting for a retry (a draining server): the attempts so far are returned. */
  signal?: AbortSignal
  /** How a name is resolved (default dns.lookup, all addresses); every address it gives is checked. */
  resolve?: (hostname: string) => Promise<string[]>
}

const defaultResolve = async (hostname: string) =>
  (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address)

/** Marks a refusal at delivery: not retried, as the same name would resolve the same way. */
class TargetRefused extends Error {}

/** A lookup for the connection that resolves, checks every address, and hands exactly those to connect. */
function checkedLookup(
  resolve: (hostname: string) => Promise<string[]>,
  allowPrivate: boolean,
): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const bad = addresses.find((a) => !addressAllowed(a, allowPrivate))
        if (addresses.length === 0) return callback(new Error(`${hostname} resolved to no address`), '', 4)
        if (bad !== undefined)
          return callback(new TargetRefused(`${hostname} resolves to ${bad}, not a public address`), '', 4)
        const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
        if (options.all) return (callback as (e: null, a: typeof all) => void)(null, all)
        callback(null, all[0]!.address, all[0]!.family)
      },
      (error: Error) => callback(error as NodeJS.ErrnoException, '', 4),
    )
  }
}

/**
 * One POST; resolves with the status, rejects with why there was none. `timeoutMs` bounds the whole
 * attempt, not only a silence: a receiver that trickles its answer a byte at a time is never idle, and
 * would otherwise hold the delivery (and a draining server's close) for as long as it liked. The body of
 * the answer is never read: the connection is closed once the status is in.
 */
function post(
  url: URL,
  body: string,
  headers: Record<string, string>,
  lookup: LookupFunction,
  timeoutMs: number,
) {
  return new Promise<number>((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      lookup,
      // A fresh connection each time: nothing of a receiver's is kept between attempts or deliveries.
      agent: false,
      timeout: timeoutMs,
    })
    const deadline = setTimeout(
      () => request.destroy(new Error(`no response within ${timeoutMs}ms`)),
      timeoutMs,
    )
    request.on('timeout', () => request.destroy(new Error(`no response within ${timeoutMs}ms`)))
    request.on('error', (error) => {
      clearTimeout(deadline)
      reject(error)
    })
    request.on('response', (response) => {
      clearTimeout(deadline)
      // Only the status counts: the rest of the answer is not waited for.
      response.on('error', () => {})
      response.destroy()
      resolve(response.statusCode ?? 0)
    })
    request.end(body)
  })
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve()
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })

/**
 * One attempt: the body made (when `body` is a function) and sent. Its own frame, which ends before the
 * wait for the next: nothing of the body is held across the retries (a run's view is as big as its
 * output). Null when there is no body any more (the run is gone).
 */
async function attemptOnce(
  target: URL,
  body: string | (() => string | null),
  secret: string,
  started: number,
  lookup: LookupFunction,
  timeoutMs: number,
): Promise<{ status: number | null; error: string | null; refused: boolean } | null> {
  const text = typeof body === 'string' ? body : body()
  if (text === null) return null
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'cordon-webhook',
    [SIGNATURE_HEADER.toLowerCase()]: signWebhook(secret, text, Math.floor(started / 1000)),
  }
  try {
    return { status: await post(target, text, headers, lookup, timeoutMs), error: null, refused: false }
  } catch (failed) {
    return { status: null, error: (failed as Error).message, refused: failed instanceof TargetRefused }
  }
}

/**
 * POSTs `body` (JSON text, or made anew for each attempt by a function: null when there is nothing left
 * to send) to `url`, signed with `secret`, until a 2xx answers or `attempts` are spent:
 * a network error, a timeout or any other status is retried after `backoff`. A target that is refused
 * (as written, or by what its name resolves to) is one failed attempt, not retried. Never throws: the
 * attempts, in order, say what happened.
 */
export async function deliverWebhook(
  url: string,
  body: string | (() => string | null),
  secret: string,
  {
    attempts = 5,
    backoff = (n) => Math.min(1000 * 2 ** (n - 1), 60_000),
    timeoutMs = 10_000,
    allowPrivate = false,
    signal,
    resolve = defaultResolve,
    onAttempt,
    firstAttempt = 1,
    delayMs = 0,
  }: DeliverOptions = {},
): Promise<WebhookAttempt[]> {
  const done: WebhookAttempt[] = []
  const lookup = checkedLookup(resolve, allowPrivate)
  if (delayMs > 0) await sleep(delayMs, signal)
  for (let attempt = firstAttempt; attempt <= attempts; attempt++) {
    if (signal?.aborted) return done
    const started = Date.now()
    let status: number | null = null
    let error: string | null = null
    // Over: delivered, or refused (as written, or by what the name resolves to: it would resolve the same
    // way again), or out of attempts.
    let over = attempt >= attempts
    let target: URL | null = null
    try {
      target = checkWebhookUrl(url, { allowPrivate })
    } catch (refused) {
      error = (refused as Error).message
      over = true
    }
    if (target) {
      const sent = await attemptOnce(target, body, secret, started, lookup, timeoutMs)
      if (sent === null) return done
      ;({ status, error } = sent)
      if (status !== null && status >= 200 && status < 300) over = true
      if (sent.refused) over = true
    }
    const wait = over ? 0 : backoff(attempt)
    const made = {
      attempt,
      at: new Date(started).toISOString(),
      status,
      error,
      durationMs: Date.now() - started,
    }
    done.push(made)
    onAttempt?.(made, over ? null : { attempt: attempt + 1, at: new Date(Date.now() + wait).toISOString() })
    if (over) return done
    await sleep(wait, signal)
  }
  return done
}
