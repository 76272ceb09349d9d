// What a run's result says of each connection through its proxies: the host as the sandbox sent it, the
// port, whether the policy let it through, and one code for what happened (docs/network.md lists them).
// The proxies keep the host raw (ProxyEvent); it is redacted before it is escaped (showEvents), so a
// secret is looked for in the very bytes the sandbox sent, not in an escaped spelling of them.
import { showHost } from './host.js'

/** The policy let the connection through; then it was made, or the name or the address failed it. */
export type ConnectionCode = 'connected' | 'unresolvable' | 'unreachable'

/**
 * Why the proxy refused a connection (`allowed: false`): a host or request that does not parse, a protocol
 * feature it does not serve, a rule, an address kind the policy keeps out, a bound of the host, a client
 * that did not finish its request in time.
 */
export type RefusalCode =
  | 'malformed-host'
  | 'malformed-request'
  | 'unsupported'
  | 'not-allowed'
  | 'denied'
  | 'loopback'
  | 'metadata'
  | 'private'
  | 'limit'
  | 'timeout'

export type NetworkCode = ConnectionCode | RefusalCode

export interface NetworkEvent {
  /** The host as the sandbox sent it (escaped: `\u0000`; redacted; cut to 253 characters); '' if none. */
  host: string
  /** The port asked for; 0 when the request named none that could be read. */
  port: number
  /** Whether the policy let it through (a name that does not resolve, or an address that does not answer, was). */
  allowed: boolean
  /** What happened: `connected`, `unresolvable`, `unreachable`, or why it was refused. */
  code: NetworkCode
  /** In words: why it was refused or failed, or the address it was allowed to. */
  reason: string
}

/** An event as a proxy keeps it: the host as received, neither redacted nor escaped yet. */
export interface ProxyEvent extends Omit<NetworkEvent, 'host'> {
  /** The host's bytes as Latin-1 text (one character a byte), at most MAX_RAW_HOST of them. */
  raw: string
  /** The sandbox sent more than MAX_RAW_HOST: `raw` is a cut, and a secret's start at its end is hidden. */
  cut: boolean
}

/** Characters of a received host kept for its event (an event shows at most 253, escaped). */
export const MAX_RAW_HOST = 1024

/** The raw-host part of an event: `text` kept whole when it fits, else its first MAX_RAW_HOST, marked cut. */
export function rawHost(text: string): Pick<ProxyEvent, 'raw' | 'cut'> {
  return text.length > MAX_RAW_HOST
    ? { raw: text.slice(0, MAX_RAW_HOST), cut: true }
    : { raw: text, cut: false }
}

/**
 * Events as a result shows them: each host hidden by `hide` (given the raw text and whether it was cut, so a
 * secret the cut split is hidden too), then escaped and cut for showing. The reason is the caller's to redact.
 */
export function showEvents(
  events: readonly ProxyEvent[],
  hide: (raw: string, cut: boolean) => string = (raw) => raw,
): NetworkEvent[] {
  return events.map(({ raw, cut, ...rest }) => ({
    host: showHost(hide(raw, cut)),
    port: rest.port,
    allowed: rest.allowed,
    code: rest.code,
    reason: rest.reason,
  }))
}

/** Whether a code is the policy's (or a bound's) refusal, not a failure of a connection it let through. */
export const isRefusal = (code: NetworkCode): code is RefusalCode =>
  code !== 'connected' && code !== 'unresolvable' && code !== 'unreachable'

/** An allowed connection's event, when the address it was allowed to did not answer. */
export function markUnreachable(
  event: ProxyEvent | null,
  address: string,
  error: NodeJS.ErrnoException,
): void {
  if (!event) return
  event.code = 'unreachable'
  event.reason = `cannot connect to ${address}: ${error.code ?? error.message}`
}
