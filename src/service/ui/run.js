// One run's page: its state and verdict, its figures, and its output tailed live from the event stream
// (followEvents: fetch with the session's page token, resuming with Last-Event-ID after a dropped
// connection, as an EventSource would, which cannot send the token).
// Output is appended as text nodes, in batches once per frame, and only the last CAP characters are kept
// in the page, so a program printing megabytes (or one 10 MB line) leaves the page responsive.
import {
  ApiError,
  ansiReader,
  api,
  commandText,
  download,
  durationText,
  el,
  followEvents,
  formatBytes,
  formatMs,
  formatTime,
  runClass,
  runDuration,
  sizeText,
  statusClass,
  verdictText,
} from './common.js'

const CAP = 256 * 1024
/**
 * Spans of output kept at once. Each colour change is a span, and a program changing colour at every
 * character made 170 000 of them, which stalled the page for a second at a time; past this many, text
 * joins the last span of its stream, in that span's colour, until the oldest are cut.
 */
const MAX_SPANS = 5000

const id = decodeURIComponent(location.pathname.split('/').pop())
const $ = (name) => document.getElementById(name)
const out = $('out')
const cancel = $('cancel')
const conn = $('conn')
const errorBox = $('error')

$('run-id').textContent = id
document.title = `Run ${id} · cordon`
const full = `/v1/runs/${encodeURIComponent(id)}/output?stream=output&limit=8388608`
$('full').href = full
// A link cannot send the page token: the output is fetched, then saved.
$('full').addEventListener('click', (event) => {
  event.preventDefault()
  download(full, `${id}-output.txt`).catch((error) => {
    errorBox.textContent = error instanceof ApiError ? error.message : String(error)
  })
})

let finished = false

// Beside the verdict: the connections the network policy refused, and those it allowed that failed, so a
// failure the policy caused reads as the policy's (a program only sees a refused or broken connection).
const refusedBox = el('p', '', { id: 'refused', class: 'hint', role: 'status' })
refusedBox.hidden = true
$('verdict').after(refusedBox)
/** Connections as the table shows them; once from the whole result, its replayed events add none. */
let connections = []
let connectionsWhole = false
const SHOWN_CONNECTIONS = 3

function connectionList(events) {
  const names = [...new Set(events.map((e) => (e.host ? `${e.host}:${e.port} (${e.code})` : e.code)))]
  const more = names.length > SHOWN_CONNECTIONS ? `, and ${names.length - SHOWN_CONNECTIONS} more` : ''
  const count = `${events.length} connection${events.length === 1 ? '' : 's'}`
  return `${count}: ${names.slice(0, SHOWN_CONNECTIONS).join(', ')}${more}`
}

function showConnections() {
  const refused = connections.filter((e) => !e.allowed)
  // Events of servers before the codes: only refusals are known.
  const failed = connections.filter((e) => e.allowed && e.code && e.code !== 'connected')
  const parts = []
  if (refused.length) parts.push(`The network policy refused ${connectionList(refused)}.`)
  if (failed.length) parts.push(`Allowed but failed: ${connectionList(failed)}.`)
  // A failure beside a refusal is most likely the refusal's: said so, and linked to the connections.
  const failedRun = current.result && current.result.status !== 'ok'
  if (refused.length && failedRun) parts.unshift('This failure may be the network policy’s:')
  refusedBox.replaceChildren(el('span', parts.join(' ')))
  if (parts.length) {
    refusedBox.append(' ', el('a', 'See the connections', { href: '#net-h', id: 'refused-link' }))
    $('verdict').setAttribute('aria-describedby', 'refused')
  }
  refusedBox.hidden = parts.length === 0
}

function showRun(run) {
  const command = commandText(run.cmd, 160)
  if (command) {
    $('title').textContent = command
    document.title = `${command} · cordon`
  }
  if (run.metadata?.name) {
    $('name').textContent = run.metadata.name
    $('name').hidden = false
  }
  $('state').textContent = run.state
  $('state').className = `badge ${run.state === 'finished' ? '' : 'st-live'}`
  const status = run.result?.status ?? ''
  $('status').textContent = status
  $('status').className = `badge ${status ? runClass(run) : ''}`
  cancel.disabled = run.state === 'finished'
  const verdict = $('verdict')
  verdict.textContent = verdictText(run.result)
  verdict.className = `verdict ${statusClass(status)}`
  const r = run.result
  const figures = [
    ['Created', formatTime(run.createdAt)],
    ['Started', formatTime(run.startedAt)],
    ['Finished', formatTime(run.finishedAt)],
    ['Exit code', r ? (r.exitCode ?? '—') : '—'],
    ['Signal', r?.signal ?? '—'],
    ['Wall time', r ? formatMs(r.wallMs) : runDuration(run)],
    ['CPU time', formatMs(r?.cpuMs)],
    ['Peak memory', formatBytes(r?.maxRssBytes)],
    ['Output kept', r ? `${formatBytes(r.outputBytes)}${r.truncated ? ' (truncated)' : ''}` : '—'],
    ['Isolation', r?.isolation ?? '—'],
  ]
  if (r?.perProcessLimits?.length) figures.push(['Per process only', r.perProcessLimits.join(', ')])
  for (const [k, v] of Object.entries(run.metadata ?? {})) figures.push([`metadata ${k}`, v])
  $('figures').replaceChildren(
    ...figures.map(([name, value]) => {
      const div = el('div')
      div.append(el('dt', name), el('dd', value))
      return div
    }),
  )
  // An `end` event's result has no logs or connections (its events carried them): the rows stay.
  if (r?.logs) $('logs').tBodies[0].replaceChildren(...r.logs.map(logRow))
  panes()
  if (r?.network) {
    connections = [...r.network]
    connectionsWhole = true
    $('network').tBodies[0].replaceChildren(...r.network.map(netRow))
    showConnections()
  }
  panes()
}

/** The Logs and Network panes show only when they have rows. */
function panes() {
  $('logs-pane').hidden = $('logs').tBodies[0].rows.length === 0
  $('net-pane').hidden = $('network').tBodies[0].rows.length === 0
}

function logRow(entry) {
  const { level, msg, ...fields } = entry
  return rowOf([level, msg, Object.keys(fields).length ? JSON.stringify(fields) : ''])
}
function netRow(event) {
  const reason = event.code ? `${event.code}: ${event.reason}` : event.reason
  return rowOf([event.host, event.port, event.allowed ? 'yes' : 'no', reason])
}
function rowOf(cells) {
  const tr = el('tr')
  tr.append(...cells.map((c) => el('td', c)))
  return tr
}

// Output: pending chunks, flushed once per animation frame.
const readers = { stdout: ansiReader(), stderr: ansiReader() }
let pending = []
let pendingChars = 0
let shown = 0
let scheduled = false

function append(stream, text) {
  pending.push({ stream, text })
  pendingChars += text.length
  // More waiting than the page keeps: what would be cut at once is never put in.
  while (pendingChars - (pending[0]?.text.length ?? 0) > CAP && pending.length > 1) {
    pendingChars -= pending.shift().text.length
    clipped()
  }
  if (!scheduled) {
    scheduled = true
    requestAnimationFrame(flush)
  }
}

function clipped() {
  $('clipped').hidden = false
  $('clip-size').textContent = formatBytes(CAP)
}

function flush() {
  scheduled = false
  const atBottom = out.scrollHeight - out.scrollTop - out.clientHeight < 32
  const batch = pending
  pending = []
  pendingChars = 0
  // Text is gathered by span first and put in the page once a span: appending to a text node part by part
  // copies it each time.
  let open = null
  const put = () => {
    if (!open) return
    const text = open.texts.join('')
    const last = out.lastChild
    const join =
      last &&
      (last.className === open.cls ||
        (out.childElementCount >= MAX_SPANS && last.classList.contains(`s-${open.stream}`)))
    if (join) last.firstChild.appendData(text)
    else out.append(el('span', text, { class: open.cls }))
    open = null
  }
  for (const { stream, text } of batch) {
    const cut = text.length > CAP ? text.slice(-CAP) : text
    if (cut !== text) clipped()
    for (const part of readers[stream].read(cut)) {
      const cls = `s-${stream}${part.cls ? ` ${part.cls}` : ''}`
      const full = out.childElementCount >= MAX_SPANS
      if (open && (open.cls === cls || (full && open.stream === stream))) open.texts.push(part.text)
      else {
        put()
        open = { cls, stream, texts: [part.text] }
      }
      shown += part.text.length
    }
  }
  put()
  // Keep the last CAP characters: whole spans first, then the front of the oldest.
  while (shown > CAP && out.firstChild) {
    clipped()
    const first = out.firstChild
    const len = first.textContent.length
    if (shown - len >= CAP) {
      out.removeChild(first)
      shown -= len
    } else {
      first.firstChild.deleteData(0, shown - CAP)
      shown = CAP
    }
  }
  if (atBottom) out.scrollTop = out.scrollHeight
}

for (const radio of document.querySelectorAll('input[name="show"]')) {
  radio.addEventListener('change', () => {
    out.classList.toggle('only-stdout', radio.value === 'stdout' && radio.checked)
    out.classList.toggle('only-stderr', radio.value === 'stderr' && radio.checked)
  })
}

async function refresh() {
  try {
    current = await api(`/v1/runs/${encodeURIComponent(id)}`)
    showRun(current)
    showConnections()
  } catch (error) {
    errorBox.textContent = error instanceof ApiError ? error.message : String(error)
  }
}

cancel.addEventListener('click', async () => {
  cancel.disabled = true
  try {
    showRun(await api(`/v1/runs/${encodeURIComponent(id)}/cancel`, { method: 'POST' }))
  } catch (error) {
    errorBox.textContent = error instanceof ApiError ? error.message : String(error)
    cancel.disabled = finished
  }
})

function follow() {
  // Only the events holding the last CAP bytes: a finished run's megabytes are not replayed to be cut.
  const seen = { stdout: false, stderr: false }
  const stop = followEvents(`/v1/runs/${encodeURIComponent(id)}/events?tail=${CAP}`, {
    state(s) {
      if (finished) return
      conn.textContent = s === 'live' ? 'Live' : s === 'reconnecting' ? 'Reconnecting…' : 'Not connected'
      if (s === 'closed') refresh()
    },
    on(type, d) {
      if (type === 'started') {
        current = { ...current, state: 'running', startedAt: d.at ?? current.startedAt }
        $('state').textContent = 'running'
        cancel.disabled = false
      } else if (type === 'output') {
        const stream = d.stream === 'stderr' ? 'stderr' : 'stdout'
        // The tail began past the stream's start: the page shows only its end.
        if (!seen[stream] && Number(d.offset) > 0) clipped()
        seen[stream] = true
        append(stream, String(d.data))
        keep(stream, String(d.data), d.at)
      } else if (type === 'log') {
        const { seq, at, ...entry } = d
        $('logs').tBodies[0].append(logRow(entry))
        panes()
      } else if (type === 'network' && !connectionsWhole) {
        const { seq, at, ...rest } = d
        $('network').tBodies[0].append(netRow(rest))
        panes()
        connections.push(rest)
        showConnections()
      } else if (type === 'end' || type === 'interrupted') {
        finished = true
        stop()
        conn.textContent = ''
        // The verdict at once; then the run view, which has the whole result.
        if (d.result) {
          current = { ...current, state: 'finished', result: d.result, finishedAt: d.at }
          showRun(current)
        }
        refresh()
      }
    },
  })
}

let current = { id, state: '', metadata: {} }
api(`/v1/runs/${encodeURIComponent(id)}`)
  .then((run) => {
    current = run
    showRun(run)
    follow()
  })
  .catch((error) => {
    errorBox.textContent = error instanceof ApiError ? error.message : String(error)
  })

// Downloads: each stream whole (up to 8 MiB a request: the API's most), and the collected files.
const say = (error) => {
  errorBox.textContent = error instanceof ApiError ? error.message : String(error)
}
for (const stream of ['stdout', 'stderr'])
  $(`dl-${stream}`).addEventListener('click', () => {
    download(
      `/v1/runs/${encodeURIComponent(id)}/output?stream=${stream}&limit=8388608`,
      `${id}-${stream}.txt`,
    ).catch(say)
  })
api(`/v1/runs/${encodeURIComponent(id)}/files`)
  .then(({ files }) => {
    $('files').replaceChildren(
      ...files.map((f) => {
        const name = typeof f === 'string' ? f : f.path
        const button = el('button', `Download ${name}`, { type: 'button' })
        const route = `/v1/runs/${encodeURIComponent(id)}/files/${name.split('/').map(encodeURIComponent).join('/')}`
        button.addEventListener('click', () => download(route, name.split('/').pop()).catch(say))
        return button
      }),
    )
  })
  .catch(() => {
    // a service that keeps no files: nothing to offer
  })

// Run again: the same stored request (its files, stdin and env too, which this page never sees).
$('rerun').addEventListener('click', async () => {
  $('rerun').disabled = true
  try {
    const run = await api(`/v1/runs/${encodeURIComponent(id)}/rerun`, { method: 'POST' })
    location.assign(`/ui/runs/${encodeURIComponent(run.id)}`)
  } catch (error) {
    say(error)
    $('rerun').disabled = false
  }
})

// The limits it ran under (the request's within its key's ceilings, the defaults for the rest).
const LIMITS = [
  ['wallTimeMs', 'Wall time', durationText],
  ['cpuTimeMs', 'CPU time', durationText],
  ['memoryBytes', 'Memory', sizeText],
  ['maxOutputBytes', 'Output kept', sizeText],
  ['maxProcesses', 'Processes', String],
  ['maxOpenFiles', 'Open files', String],
  ['maxFileSizeBytes', 'File size', sizeText],
]
api(`/v1/runs/${encodeURIComponent(id)}/request`)
  .then((request) => {
    const items = LIMITS.filter(([name]) => typeof request.limits[name] === 'number').map(
      ([name, label, text]) => [label, text(request.limits[name])],
    )
    const network = request.network
    items.push([
      'Network',
      typeof network === 'string' ? network : `allow ${network.allow.join(' ') || 'nothing'}`,
    ])
    items.push(['Isolation asked', request.isolation])
    $('limits').replaceChildren(
      ...items.map(([name, value]) => {
        const div = el('div')
        div.append(el('dt', name), el('dd', value))
        return div
      }),
    )
  })
  .catch(() => {
    $('limits').replaceChildren(el('div', 'Not available.'))
  })

// A running run's wall time counts up.
setInterval(() => {
  if (current.state === 'running' || current.state === 'queued') showRun(current)
}, 1000)

// The lines view: the output kept (its last CAP characters) as numbered lines, each with the time its first
// character arrived, searchable. Built only while it is shown, from the chunks as they came, without
// their colours: the text view stays the fast one for a flood.
const chunks = []
let chunkChars = 0
let linesDirty = false
const linesBox = $('lines')
const search = $('search')

function keep(stream, text, at) {
  const cut = text.length > CAP ? text.slice(-CAP) : text
  chunks.push({ stream, text: cut, at: at ? Date.parse(at) : Date.now() })
  chunkChars += cut.length
  while (chunkChars > CAP && chunks.length > 1) chunkChars -= chunks.shift().text.length
  if (!linesBox.hidden && !linesDirty) {
    linesDirty = true
    setTimeout(drawLines, 250)
  }
}

const MAX_LINES = 5000
const LINE_CHARS = 4000

function linesOf() {
  const readers = { stdout: ansiReader(), stderr: ansiReader() }
  const open = { stdout: null, stderr: null }
  const lines = []
  for (const { stream, text, at } of chunks) {
    const pieces = readers[stream]
      .read(text)
      .map((p) => p.text)
      .join('')
      .split('\n')
    pieces.forEach((piece, i) => {
      const last = i === pieces.length - 1
      if (last && piece === '') return
      let line = open[stream]
      if (!line) {
        line = { stream, at, text: '' }
        lines.push(line)
        open[stream] = line
      }
      if (line.text.length < LINE_CHARS) line.text += piece.slice(0, LINE_CHARS - line.text.length)
      if (!last) open[stream] = null
    })
  }
  return lines.slice(-MAX_LINES)
}

function drawLines() {
  linesDirty = false
  if (linesBox.hidden) return
  const start = Date.parse(current.startedAt ?? current.createdAt ?? '') || chunks[0]?.at || 0
  const query = search.value.toLowerCase()
  const atBottom = linesBox.scrollHeight - linesBox.scrollTop - linesBox.clientHeight < 32
  let hits = 0
  const rows = []
  linesOf().forEach((line, i) => {
    const hit = query !== '' && line.text.toLowerCase().includes(query)
    if (hit) hits++
    if (query !== '' && !hit) return
    const row = el('div', null, { class: `line s-${line.stream}` })
    const seconds = Math.max(0, (line.at - start) / 1000)
    row.append(
      el('span', i + 1, { class: 'ln' }),
      el('span', `+${seconds.toFixed(3)}s`, { class: 'ts', title: new Date(line.at).toLocaleString() }),
      el('span', line.text, { class: 'tx' }),
    )
    rows.push(row)
  })
  linesBox.replaceChildren(...rows)
  $('search-count').textContent = query === '' ? '' : `${hits} line${hits === 1 ? '' : 's'} match`
  if (atBottom && query === '') linesBox.scrollTop = linesBox.scrollHeight
}

function showView(view) {
  linesBox.hidden = view !== 'lines'
  out.hidden = view === 'lines'
  for (const radio of document.querySelectorAll('input[name="view"]')) radio.checked = radio.value === view
  if (view === 'lines') drawLines()
}
for (const radio of document.querySelectorAll('input[name="view"]'))
  radio.addEventListener('change', () => radio.checked && showView(radio.value))
// Searching reads lines: it shows the lines view, with only the lines that match.
search.addEventListener('input', () => showView('lines'))
for (const radio of document.querySelectorAll('input[name="show"]'))
  radio.addEventListener('change', () => {
    linesBox.classList.toggle('only-stdout', radio.value === 'stdout' && radio.checked)
    linesBox.classList.toggle('only-stderr', radio.value === 'stderr' && radio.checked)
  })
