// The runs page: the list (filters in the address, pages by cursor, refreshed every 2 s while the page is
// visible: the API has no stream of the whole list) and the form that starts a run.
import { ApiError, api, el, formatMs, formatTime, parsePairs, statusClass } from './common.js'

const params = new URLSearchParams(location.search)
/** Runs a page: 25, or the address's `limit` (1 to 1000). */
const PAGE = Math.min(1000, Math.max(1, Number(params.get('limit')) || 25))
const REFRESH_MS = 2000

const tbody = document.querySelector('#runs tbody')
const filters = document.getElementById('filters')
const listError = document.getElementById('list-error')
const live = document.getElementById('live')
const newer = document.getElementById('newer')
const older = document.getElementById('older')

filters.state.value = params.get('state') ?? ''
filters.status.value = params.get('status') ?? ''
filters.metadata.value = params.get('metadata') ?? ''

/** Cursors of the pages before this one (the first page's is null), and this page's. */
const cursors = []
let cursor = null
let nextCursor = null

function query() {
  const q = new URLSearchParams({ limit: String(PAGE) })
  if (filters.state.value) q.set('state', filters.state.value)
  if (filters.status.value) q.set('status', filters.status.value)
  for (const [k, v] of Object.entries(parsePairs(filters.metadata.value))) q.set(`metadata.${k}`, v)
  if (cursor) q.set('cursor', cursor)
  return q
}

function row(run) {
  const tr = el('tr')
  const link = el('a', run.id, { href: `/ui/runs/${encodeURIComponent(run.id)}`, class: 'mono' })
  const first = el('td')
  first.append(link)
  const status = run.result?.status ?? ''
  tr.append(
    first,
    el('td', run.state, { class: run.state === 'finished' ? '' : 'st-live' }),
    el('td', status || '—', { class: statusClass(status) }),
    el('td', formatTime(run.createdAt)),
    el('td', formatMs(run.result?.wallMs)),
    el(
      'td',
      Object.entries(run.metadata ?? {})
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
      { class: 'mono' },
    ),
  )
  return tr
}

let loading = false
async function load() {
  if (loading) return
  loading = true
  try {
    const page = await api(`/v1/runs?${query()}`)
    // Re-rendering under a focused link would drop the keyboard's place: wait until focus leaves the list.
    if (!tbody.contains(document.activeElement)) tbody.replaceChildren(...page.runs.map(row))
    nextCursor = page.nextCursor
    document.getElementById('empty').hidden = page.runs.length > 0
    older.disabled = !nextCursor
    newer.disabled = cursors.length === 0
    listError.textContent = ''
    live.textContent = `Updated ${new Date().toLocaleTimeString()}`
  } catch (error) {
    listError.textContent = error instanceof ApiError ? error.message : `Cannot list runs: ${error}`
  } finally {
    loading = false
  }
}

filters.addEventListener('submit', (event) => {
  event.preventDefault()
  cursors.length = 0
  cursor = null
  const shown = new URLSearchParams()
  for (const name of ['state', 'status', 'metadata'])
    if (filters[name].value) shown.set(name, filters[name].value)
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

setInterval(() => {
  if (document.visibilityState === 'visible') load()
}, REFRESH_MS)
load()

// Starting a run.
const form = document.getElementById('run-form')
const runError = document.getElementById('run-error')
form.addEventListener('submit', async (event) => {
  event.preventDefault()
  runError.textContent = ''
  const text = form.cmd.value.trim()
  const cmd = form.shell.checked ? ['sh', '-c', text] : text.split(/\s+/).filter(Boolean)
  const limits = {}
  for (const name of ['wallTimeMs', 'cpuTimeMs', 'memoryBytes', 'maxOutputBytes']) {
    const value = form[name].value.trim()
    if (value) limits[name] = /^\d+$/.test(value) ? Number(value) : value
  }
  const body = { cmd, options: { limits, network: form.network.value } }
  if (form.stdin.value) body.stdin = form.stdin.value
  const metadata = parsePairs(form.metadata.value)
  if (Object.keys(metadata).length) body.metadata = metadata
  const button = form.querySelector('button[type="submit"]')
  button.disabled = true
  try {
    const run = await api('/v1/runs', { method: 'POST', body })
    location.assign(`/ui/runs/${encodeURIComponent(run.id)}`)
  } catch (error) {
    runError.textContent = error instanceof ApiError ? error.message : String(error)
    button.disabled = false
  }
})
