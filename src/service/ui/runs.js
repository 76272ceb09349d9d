// The runs page: the list (filters in the address, pages by cursor) kept fresh by the runs' feed
// (`GET /v1/runs/events`: each run's summary as it is made, starts and finishes; `sync` to list again)
// rather than by polling, and the form that starts a run within what the key may ask (`GET /v1/keys/me`).
import {
  ApiError,
  api,
  commandText,
  durationText,
  el,
  followEvents,
  formatTime,
  parsePairs,
  runClass,
  runDuration,
  sizeText,
  unitValue,
} from './common.js'

const params = new URLSearchParams(location.search)
/** Runs a page: 25, or the address's `limit` (1 to 1000). */
const PAGE = Math.min(1000, Math.max(1, Number(params.get('limit')) || 25))
const FILTERS = ['state', 'status', 'key', 'metadata']

const tbody = document.querySelector('#runs tbody')
const filters = document.getElementById('filters')
const listError = document.getElementById('list-error')
const live = document.getElementById('live')
const newer = document.getElementById('newer')
const older = document.getElementById('older')

for (const name of FILTERS) filters[name].value = params.get(name) ?? ''

/** Cursors of the pages before this one (the first page's is null), and this page's. */
const cursors = []
let cursor = null
let nextCursor = null

function query() {
  const q = new URLSearchParams({ limit: String(PAGE) })
  for (const name of ['state', 'status', 'key'])
    if (filters[name].value) q.set(name, filters[name].value.trim())
  for (const [k, v] of Object.entries(parsePairs(filters.metadata.value))) q.set(`metadata.${k}`, v)
  if (cursor) q.set('cursor', cursor)
  return q
}

/** Whether a run the feed announces belongs in this list (the server filters the list the same way). */
function matches(run) {
  if (filters.state.value && run.state !== filters.state.value) return false
  if (filters.status.value && run.result?.status !== filters.status.value) return false
  if (filters.key.value.trim() && run.keyId !== filters.key.value.trim()) return false
  for (const [k, v] of Object.entries(parsePairs(filters.metadata.value)))
    if (run.metadata?.[k] !== v) return false
  return true
}

function cells(run) {
  const first = el('td', null, { 'data-label': 'Run' })
  const link = el('a', null, { href: `/ui/runs/${encodeURIComponent(run.id)}` })
  if (run.metadata?.name) link.append(el('span', run.metadata.name, { class: 'run-name' }))
  link.append(el('span', commandText(run.cmd, 120) || run.id, { class: 'run-cmd mono' }))
  first.append(link, el('span', run.id, { class: 'run-id mono' }))
  const status = run.result?.status ?? ''
  const duration = el('td', runDuration(run), { 'data-label': 'Duration' })
  // A run not finished counts up each second (the timer below).
  if (run.state !== 'finished') {
    duration.classList.add('elapsed')
    duration.dataset.since = run.startedAt ?? run.createdAt
  }
  return [
    first,
    el('td', run.state, { class: run.state === 'finished' ? '' : 'st-live', 'data-label': 'State' }),
    el('td', status || '—', { class: status ? runClass(run) : '', 'data-label': 'Status' }),
    el('td', formatTime(run.createdAt), { 'data-label': 'Created' }),
    duration,
    el(
      'td',
      Object.entries(run.metadata ?? {})
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
      { class: 'mono', 'data-label': 'Metadata' },
    ),
  ]
}

function row(run) {
  const tr = el('tr', null, { 'data-id': run.id })
  tr.append(...cells(run))
  return tr
}

/** A run's new summary: its row updated in place (its link kept when it has the keyboard's focus). */
function upsert(run) {
  const old = [...tbody.rows].find((tr) => tr.dataset.id === run.id)
  if (old) {
    if (!matches(run)) return old.remove()
    const fresh = cells(run)
    if (old.contains(document.activeElement))
      for (let i = 1; i < fresh.length; i++) old.cells[i].replaceWith(fresh[i])
    else old.replaceChildren(...fresh)
    return
  }
  // A new run goes on top of the first page; other pages wait for their next reading.
  if (cursor !== null || !matches(run)) return
  tbody.prepend(row(run))
  while (tbody.rows.length > PAGE) tbody.lastElementChild.remove()
  document.getElementById('empty').hidden = true
}

let loading = null
async function load() {
  if (loading) return loading
  loading = (async () => {
    try {
      // The list has no output: GET /v1/runs answers summaries.
      const page = await api(`/v1/runs?${query()}`)
      if (!tbody.contains(document.activeElement)) tbody.replaceChildren(...page.runs.map(row))
      else for (const run of page.runs) upsert(run)
      nextCursor = page.nextCursor
      document.getElementById('empty').hidden = page.runs.length > 0
      older.disabled = !nextCursor
      newer.disabled = cursors.length === 0
      listError.textContent = ''
    } catch (error) {
      listError.textContent = error instanceof ApiError ? error.message : `Cannot list runs: ${error}`
    } finally {
      loading = null
    }
  })()
  return loading
}

filters.addEventListener('submit', (event) => {
  event.preventDefault()
  cursors.length = 0
  cursor = null
  const shown = new URLSearchParams()
  for (const name of FILTERS) if (filters[name].value) shown.set(name, filters[name].value)
  history.replaceState(null, '', shown.size ? `?${shown}` : location.pathname)
  load()
})
older.addEventListener('click', () => {
  if (!nextCursor) return
  cursors.push(cursor)
  cursor = nextCursor
  load()
})
newer.addEventListener('click', () => {
  if (cursors.length === 0) return
  cursor = cursors.pop()
  load()
})

// Live: the feed's first event is a `sync` (list now), then each change; after a dropped connection it
// resumes where it was, or says `sync` again.
followEvents('/v1/runs/events', {
  state(s) {
    live.textContent = s === 'live' ? 'Live' : s === 'reconnecting' ? 'Reconnecting…' : 'Not updating'
  },
  on(type, data) {
    if (type === 'sync') load()
    else if (type === 'run') upsert(data)
    else if (type === 'removed') [...tbody.rows].find((tr) => tr.dataset.id === data.id)?.remove()
  },
})
setInterval(() => {
  for (const td of tbody.querySelectorAll('.elapsed'))
    td.textContent = runDuration({
      state: 'running',
      startedAt: td.dataset.since,
      createdAt: td.dataset.since,
    })
}, 1000)

// Starting a run, within what the key may ask.
const form = document.getElementById('run-form')
const runError = document.getElementById('run-error')
const LIMIT_LABELS = {
  wallTimeMs: 'Wall time',
  cpuTimeMs: 'CPU time',
  memoryBytes: 'Memory',
  maxOutputBytes: 'Output kept',
}
let allowance = null
api('/v1/keys/me')
  .then((me) => {
    allowance = me.allowance
    if (me.scopes?.includes('admin'))
      for (const e of document.querySelectorAll('.admin-only')) e.hidden = false
    for (const [name, label] of Object.entries(LIMIT_LABELS)) {
      const limit = allowance.limits[name]
      if (!limit) continue
      const text = form[name].dataset.kind === 'duration' ? durationText : sizeText
      form[name].placeholder = text(limit.default)
      form[name].title =
        `${label}: ${text(limit.default)} unless set${limit.max !== null ? `, at most ${text(limit.max)}` : ''}`
    }
    const names = { none: 'none', allow: 'allowlist (through the proxy)', host: 'host (unfiltered)' }
    form.network.replaceChildren(...allowance.network.modes.map((m) => el('option', names[m], { value: m })))
    const ceiling = allowance.network.allow
    document.getElementById('allow-hint').textContent =
      ceiling === 'any'
        ? 'Any host.'
        : ceiling === 'public'
          ? 'Public hosts only.'
          : ceiling
            ? `Within this key's: ${ceiling.allow.join(' ') || 'none'}`
            : ''
  })
  .catch(() => {
    // The form still works with the server's defaults; the request is judged there anyway.
  })
form.network.addEventListener('change', () => {
  for (const e of form.querySelectorAll('.allow-row')) e.hidden = form.network.value !== 'allow'
})

function requestOf() {
  const text = form.cmd.value.trim()
  const cmd = form.shell.checked ? ['sh', '-c', text] : text.split(/\s+/).filter(Boolean)
  const limits = {}
  for (const [name, label] of Object.entries(LIMIT_LABELS)) {
    const value = unitValue(label, form[name].dataset.kind, form[name].value)
    if (value !== undefined) limits[name] = value
  }
  let network = form.network.value
  if (network === 'allow') network = { allow: form.allow.value.split(/[\s,]+/).filter(Boolean) }
  const body = { cmd, options: { limits, network } }
  if (form.stdin.value) body.stdin = form.stdin.value
  const metadata = parsePairs(form.metadata.value)
  if (form.runname.value.trim()) metadata.name = form.runname.value.trim()
  if (Object.keys(metadata).length) body.metadata = metadata
  return body
}

form.addEventListener('submit', async (event) => {
  event.preventDefault()
  runError.textContent = ''
  const button = form.querySelector('button[type="submit"]')
  button.disabled = true
  try {
    const run = await api('/v1/runs', { method: 'POST', body: requestOf() })
    location.assign(`/ui/runs/${encodeURIComponent(run.id)}`)
  } catch (error) {
    runError.textContent = error instanceof ApiError || error instanceof Error ? error.message : String(error)
    button.disabled = false
  }
})
