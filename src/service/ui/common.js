// What both pages share: the API over the session cookie, words for a result, and the ANSI reader.
// Program output is only ever put in the page as text (textContent, text nodes), never as markup.

/** The page's own header: a cross-site form or fetch cannot set it (the server's CSRF check). */
const CSRF = { 'x-cordon-csrf': '1' }

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
}

/** A /v1 call with the session cookie; a 401 sends the browser to sign in again. */
export async function api(path, { method = 'GET', body } = {}) {
  const headers = { ...CSRF }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  if (res.status === 401) {
    location.assign(`/ui/login?m=expired&next=${encodeURIComponent(location.pathname)}`)
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
  return res.status === 204 ? null : res.json()
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
