// What the pages share: the API over the session (its cookie, and its page token in a header), its event
// streams, words for a result, and the ANSI reader. Program output is only ever put in the page as text
// (textContent, text nodes), never as markup.

/**
 * Where the session's page token is kept: this origin's storage, which a page of any other origin (another
 * port of this host included) cannot read. The cookie alone authenticates nothing on /v1: it reaches every
 * port of the host.
 */
const TOKEN = 'cordon.session'

export function keepSessionToken(token) {
  localStorage.setItem(TOKEN, token)
}

/** The headers every /v1 request of the page sends. */
function sessionHeaders() {
  return { 'x-cordon-session': localStorage.getItem(TOKEN) ?? '' }
}

function toSignIn() {
  location.assign(`/ui/login?m=expired&next=${encodeURIComponent(location.pathname)}`)
}

// Signing out forgets the page token too. (Not in a page, as when a test loads this module: nothing.)
if (typeof document !== 'undefined')
  for (const form of document.querySelectorAll('form[action="/ui/logout"]'))
    form.addEventListener('submit', () => localStorage.removeItem(TOKEN))

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
}

/** A /v1 request of the session; a 401 sends the browser to sign in again. */
async function request(path, { method = 'GET', body, headers = {}, signal } = {}) {
  const all = { ...sessionHeaders(), ...headers }
  if (body !== undefined) all['content-type'] = 'application/json'
  const res = await fetch(path, {
    method,
    headers: all,
    credentials: 'same-origin',
    ...(signal ? { signal } : {}),
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  if (res.status === 401) {
    toSignIn()
    throw new ApiError(401, 'unauthorized', 'signed out')
  }
  if (!res.ok) {
    let code = 'http'
    let message = `HTTP ${res.status}`
    try {
      const error = (await res.json()).error
      code = error.code
      message = error.message
    } catch {
      // not the error shape
    }
    throw new ApiError(res.status, code, message)
  }
  return res
}

/** A /v1 call: its JSON answer (null for 204). */
export async function api(path, init = {}) {
  const res = await request(path, init)
  return res.status === 204 ? null : res.json()
}

/** Saves what a /v1 GET answers as a file (a link could not send the page token). */
export async function download(path, name) {
  const blob = await (await request(path)).blob()
  const url = URL.createObjectURL(blob)
  const a = el('a', null, { href: url, download: name })
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 60_000)
}

/**
 * Follows a run's event stream (Server-Sent Events over fetch, which sends the page token; an EventSource
 * cannot send a header): `on(type, data, id)` for each event, `state('live' | 'reconnecting' | 'closed')`.
 * A dropped connection is reopened after a pause with Last-Event-ID, so each event comes once; the stream
 * is done after `end` or `interrupted`. Returns a function that stops it.
 */
export function followEvents(path, { on, state }) {
  const stop = new AbortController()
  let last = null
  let done = false
  const run = async () => {
    let pause = 500
    while (!done && !stop.signal.aborted) {
      try {
        const res = await request(path, {
          headers: { accept: 'text/event-stream', ...(last !== null ? { 'last-event-id': last } : {}) },
          signal: stop.signal,
        })
        state('live')
        pause = 500
        for await (const event of sseEvents(res.body)) {
          if (event.id !== null) last = event.id
          if (event.type === 'end' || event.type === 'interrupted') done = true
          on(event.type, JSON.parse(event.data), event.id)
        }
        if (done) break
      } catch (error) {
        // A refusal (a revoked key, a run deleted) ends it; a dropped connection is retried.
        if (stop.signal.aborted || (error instanceof ApiError && error.status < 500 && error.status !== 429))
          break
      }
      state('reconnecting')
      await new Promise((resolve) => setTimeout(resolve, pause))
      pause = Math.min(pause * 2, 5000)
    }
    state('closed')
  }
  run()
  return () => stop.abort()
}

/** The events of an SSE body: `{ id, type, data }`, comments skipped (the WHATWG rules, LF or CRLF). */
async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ''
  let id = null
  let type = ''
  let data = []
  let yielded = performance.now()
  for (;;) {
    // Output pouring in arrives faster than it is read: hand the thread back now and then, so the page
    // draws between chunks (an EventSource parses off the page's own work; this reader does not).
    if (performance.now() - yielded > 8) {
      await new Promise((resolve) => setTimeout(resolve, 0))
      yielded = performance.now()
    }
    const { done, value } = await reader.read()
    if (done) return
    buffer += value
    let at = buffer.search(/\r?\n|\r/)
    // A CR at the very end may be the first half of a CRLF: wait for what follows it.
    while (at >= 0 && !(at === buffer.length - 1 && buffer[at] === '\r')) {
      const line = buffer.slice(0, at)
      buffer = buffer.slice(at + (buffer[at] === '\r' && buffer[at + 1] === '\n' ? 2 : 1))
      if (line === '') {
        if (data.length > 0) yield { id, type: type || 'message', data: data.join('\n') }
        type = ''
        data = []
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'id') id = value
        else if (field === 'event') type = value
        else if (field === 'data') data.push(value)
      }
      at = buffer.search(/\r?\n|\r/)
    }
  }
}

/** The verdict in words: `timeout: wall time exceeded 2s`, `nonzero-exit: exit code 3`, `ok`. */
export function verdictText(result) {
  if (!result) return ''
  if (result.violation) return `${result.violation.kind}: ${result.violation.message}`
  if (result.status === 'nonzero-exit') return `nonzero-exit: exit code ${result.exitCode}`
  if (result.status === 'signaled') return `signaled: killed by ${result.signal}`
  return result.status
}

export function statusClass(status) {
  if (!status) return ''
  return status === 'ok' ? 'st-ok' : 'st-bad'
}

export function formatBytes(n) {
  if (n === null || n === undefined) return '—'
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return '—'
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`
}

export function formatTime(iso) {
  return iso ? new Date(iso).toLocaleString() : '—'
}

/** `a=1 b=2` as `{ a: '1', b: '2' }`. */
export function parsePairs(text) {
  const out = {}
  for (const pair of text.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf('=')
    if (at > 0) out[pair.slice(0, at)] = pair.slice(at + 1)
  }
  return out
}

/** An element with text (never markup) and attributes. */
export function el(tag, text, attrs = {}) {
  const node = document.createElement(tag)
  if (text !== undefined && text !== null) node.textContent = String(text)
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value)
  return node
}

// ESC [ params final (CSI), ESC ] … BEL|ESC \ (OSC), other ESC pairs; and C0 controls but \t \n.
const ESCAPES =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: terminal escapes are what it reads
  /\x1b\[([0-9;?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]/g
// biome-ignore lint/suspicious/noControlCharactersInRegex: an escape cut off at a chunk's end
const PARTIAL = /\x1b(?:\[[0-9;?]*[ -/]*|\][^\x07\x1b]*\x1b?)?$/

/**
 * Reads a stream's text with terminal escapes: colours (SGR) become class names, every other escape and
 * control character is dropped. Stateful: an escape split between two chunks is read whole, and a colour
 * carries on into the next chunk. `read(text)` returns `[{ text, cls }]`.
 */
export function ansiReader() {
  let carry = ''
  let fg = ''
  let bold = false
  let underline = false
  const cls = () => [fg, bold ? 'a-b' : '', underline ? 'a-u' : ''].filter(Boolean).join(' ')
  const sgr = (params) => {
    const codes = params === '' ? [0] : params.split(';').map(Number)
    for (let i = 0; i < codes.length; i++) {
      const code = codes[i]
      // 256-colour and true-colour forms (38;5;n, 38;2;r;g;b, and 48 for the background): not drawn, and
      // their numbers are not read as codes of their own.
      if (code === 38 || code === 48) {
        i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 0
      } else if (code === 0) {
        fg = ''
        bold = false
        underline = false
      } else if (code === 1) bold = true
      else if (code === 22) bold = false
      else if (code === 4) underline = true
      else if (code === 24) underline = false
      else if ((code >= 30 && code <= 37) || (code >= 90 && code <= 97)) fg = `a${code}`
      else if (code === 39) fg = ''
    }
  }
  return {
    read(chunk) {
      let text = carry + chunk
      carry = ''
      const partial = PARTIAL.exec(text)
      // Keep a short unfinished escape for the next chunk; a long one is not an escape worth waiting for.
      if (partial && partial[0].length < 256) {
        carry = partial[0]
        text = text.slice(0, partial.index)
      }
      const parts = []
      let last = 0
      for (const m of text.matchAll(ESCAPES)) {
        if (m.index > last) parts.push({ text: text.slice(last, m.index), cls: cls() })
        if (m[2] === 'm') sgr(m[1])
        last = m.index + m[0].length
      }
      if (last < text.length) parts.push({ text: text.slice(last), cls: cls() })
      return parts
    },
  }
}

/** A command as one line: arguments with a space or a quote in them quoted, the whole cut to `max`. */
export function commandText(cmd, max = 200) {
  if (!Array.isArray(cmd) || cmd.length === 0) return ''
  const text = cmd.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`)).join(' ')
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/** The class of a run's state or status: its colour (green ok, amber limits, red failures, blue live). */
export function runClass(run) {
  if (run.state !== 'finished') return 'st-live'
  const status = run.result?.status ?? ''
  if (status === 'ok') return 'st-ok'
  if (status === 'canceled') return 'st-muted'
  if (['timeout', 'cpu-time', 'memory', 'output-limit', 'process-limit', 'file-size'].includes(status))
    return 'st-warn'
  return 'st-bad'
}

/** How long a run took, or has taken so far (running: since it started; queued: since it was made). */
export function runDuration(run, now = Date.now()) {
  if (run.result?.wallMs !== undefined && run.state === 'finished') return formatMs(run.result.wallMs)
  const from = Date.parse(run.startedAt ?? run.createdAt)
  const to = run.finishedAt ? Date.parse(run.finishedAt) : now
  return Number.isFinite(from) ? formatElapsed(to - from) : '—'
}

export function formatElapsed(ms) {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
}

/** A duration in the units the CLI and the schema take: 30000 as `30s`, 1500 as `1500ms`. */
export function durationText(ms) {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`
  if (ms % 60_000 === 0) return `${ms / 60_000}m`
  if (ms % 1000 === 0) return `${ms / 1000}s`
  return `${ms}ms`
}

/** A size in the units the CLI and the schema take: 536870912 as `512M`. */
export function sizeText(bytes) {
  for (const [unit, n] of [
    ['G', 1024 ** 3],
    ['M', 1024 ** 2],
    ['K', 1024],
  ])
    if (bytes % n === 0) return `${bytes / n}${unit}`
  return `${bytes}B`
}

/**
 * A limit's value as typed, for the request: the text itself (the server reads its unit as the CLI does),
 * a bare number refused as `cordon run --timeout 2` is (2 ms surprised everyone who meant seconds).
 */
export function unitValue(label, kind, text) {
  const value = text.trim()
  if (!value) return undefined
  if (/^\d+(?:\.\d+)?$/.test(value)) {
    const hint =
      kind === 'duration' ? `${value}s or ${value}ms (also m, h)` : `${value}M, ${value}K or ${value}G`
    throw new Error(`${label}: "${value}" needs a unit: ${hint}`)
  }
  return value
}
