// The web dashboard: `/ui` (the runs) and `/ui/runs/{id}` (one run, live), plain HTML, ES modules and CSS
// from src/service/ui/ (copied into dist/service/ui/ by the build: nothing is built on the user's machine),
// read once at start-up. The page talks to the same /v1 API as any client.
//
// Auth is the API's: the browser posts a key once (`POST /ui/session`) and gets a random session id in an
// HttpOnly, SameSite=Strict cookie, and a second random value, the session's page token, in the answer to
// that very post, which the page keeps in its origin's storage and sends as a header on every /v1 request.
// The cookie alone authenticates nothing on /v1: a cookie is sent to every port of its host, so any other
// service on the same host (another program's web server, a sandbox's with the host network) receives it,
// and replayed from there it was an admin session. The page token is never in a cookie, a URL or a page
// served by GET: only a page of this origin can read it, and only the sign-in's own answer gives it.
// Sessions live in this process's memory only (a restart logs everyone out): each maps to the key's token,
// so every request authenticates the key again and a revoked key ends its sessions at their next request
// (and its event streams at their next heartbeat).
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { type Context, Hono, type MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import type { KeyRecord, Service } from '../types.js'

export const SESSION_COOKIE = 'cordon_session'
/**
 * The cookie's name over TLS: a `__Host-` cookie is Secure, host-only and `Path=/`, so neither a plain-http
 * page of the host nor a sibling domain can set one in its place.
 */
export const SECURE_SESSION_COOKIE = '__Host-cordon_session'
/** The header the page sends its session's page token in, with the cookie, on every /v1 request. */
export const SESSION_HEADER = 'x-cordon-session'
export const DEFAULT_SESSION_TTL_MS = 12 * 60 * 60 * 1000
/** Sessions held at once; past it the expired go, then the oldest (each needed a valid key to make). */
const MAX_SESSIONS = 10_000
/**
 * Sessions one key holds; past it that key's oldest goes. Without it, any key (one that may only read
 * its own runs) signing in 10 000 times pushed every other key's sessions out of the table.
 */
export const MAX_SESSIONS_PER_KEY = 64

interface Session {
  token: string
  keyId: string
  expiresAt: number
  pageToken: string
}

export interface SessionOf {
  id: string
  key: KeyRecord
  token: string
  /** What the page sends in SESSION_HEADER: given once, in the sign-in's answer. */
  pageToken: string
}

export interface Sessions {
  /** A new session for a key's token: its id (for the cookie) and its page token (for the page). */
  create(token: string, key: KeyRecord): { id: string; pageToken: string }
  /** The key and token of a live session whose key is still valid; null otherwise (and it is forgotten). */
  check(id: string): SessionOf | null
  delete(id: string): void
  readonly size: number
}

export function createSessions(
  service: Pick<Service, 'authenticate'>,
  ttlMs = DEFAULT_SESSION_TTL_MS,
  now: () => number = Date.now,
): Sessions {
  const sessions = new Map<string, Session>()
  /** Each key's session ids, oldest first (a Set keeps its insertion order). */
  const byKey = new Map<string, Set<string>>()
  const forget = (id: string) => {
    const session = sessions.get(id)
    if (!session) return
    sessions.delete(id)
    const mine = byKey.get(session.keyId)
    mine?.delete(id)
    if (mine?.size === 0) byKey.delete(session.keyId)
  }
  return {
    create(token, key) {
      const id = randomBytes(32).toString('base64url')
      const mine = byKey.get(key.id)
      if (mine && mine.size >= MAX_SESSIONS_PER_KEY) forget(mine.values().next().value as string)
      if (sessions.size >= MAX_SESSIONS) {
        const t = now()
        for (const [old, session] of sessions) if (session.expiresAt <= t) forget(old)
        // Still full of live sessions (of more than 150 keys): the oldest goes.
        if (sessions.size >= MAX_SESSIONS) forget(sessions.keys().next().value as string)
      }
      const pageToken = randomBytes(32).toString('base64url')
      sessions.set(id, { token, keyId: key.id, expiresAt: now() + ttlMs, pageToken })
      const set = byKey.get(key.id) ?? new Set<string>()
      set.add(id)
      byKey.set(key.id, set)
      return { id, pageToken }
    },
    check(id) {
      const session = sessions.get(id)
      if (!session) return null
      const key = session.expiresAt > now() ? service.authenticate(session.token) : null
      if (!key || key.id !== session.keyId) {
        forget(id)
        return null
      }
      return { id, key, token: session.token, pageToken: session.pageToken }
    },
    delete(id) {
      forget(id)
    },
    get size() {
      return sessions.size
    },
  }
}

/**
 * Whether the request came over TLS (or through a proxy that says it did). It only picks the cookie's
 * name: a client that claims https over plain http gets nothing but a cookie a browser would not send it.
 */
function overTls(c: Context): boolean {
  if (new URL(c.req.url).protocol === 'https:') return true
  return c.req.header('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase() === 'https'
}

/** The session cookie's name for this request: `__Host-` over TLS. */
const cookieName = (c: Context) => (overTls(c) ? SECURE_SESSION_COOKIE : SESSION_COOKIE)

/** The session a request's cookie names, when it is live and its key valid (the page token unchecked). */
export function sessionOf(c: Context, sessions: Sessions): SessionOf | null {
  const id = getCookie(c, cookieName(c))
  return id ? sessions.check(id) : null
}

/** The request carries the session's page token (compared in constant time). */
export function pageTokenOk(c: Context, session: SessionOf): boolean {
  const sent = Buffer.from(c.req.header(SESSION_HEADER) ?? '')
  const want = Buffer.from(session.pageToken)
  return sent.length === want.length && timingSafeEqual(sent, want)
}

/** The request's Origin (when sent) names this very host. */
export function sameOrigin(c: Context): boolean {
  return originMatchesHost(c.req.header('origin'), c.req.header('host') ?? new URL(c.req.url).host)
}

/**
 * An Origin header (when sent) names `host`. By host, not by scheme: behind a TLS proxy the server sees
 * http while the page is https. A browser sends Origin on every cross-origin request; other clients none.
 */
export function originMatchesHost(origin: string | undefined, host: string): boolean {
  if (origin === undefined) return true
  try {
    return new URL(origin).host === host
  } catch {
    return false
  }
}

const SECURITY_HEADERS: Record<string, string> = {
  // Only this server's own files: no inline script or style, no framing, nothing posted elsewhere.
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  // same-origin, not no-referrer: with no-referrer the browser sends `Origin: null` on the page's own posts.
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
}

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
}
const ASSETS = ['style.css', 'common.js', 'login.js', 'runs.js', 'run.js', 'icon.svg']
const PAGES = ['login.html', 'runs.html', 'run.html']

/** The dashboard's files, read once (they are small); a missing file fails at start-up, not per request. */
function loadFiles(): Map<string, string> {
  const dir = new URL('../ui/', import.meta.url)
  const files = new Map<string, string>()
  for (const name of [...ASSETS, ...PAGES]) files.set(name, readFileSync(new URL(name, dir), 'utf8'))
  return files
}

const LOGIN_MESSAGES = {
  none: '',
  bad: 'That key is unknown or revoked.',
  expired: 'Your session ended: enter a key again.',
  out: 'Signed out.',
} as const

/** Where to go after signing in: only a dashboard path of this server, never elsewhere. */
function safeNext(next: unknown): string {
  return typeof next === 'string' && /^\/ui(?:\/runs\/[A-Za-z0-9_-]{1,128})?$/.test(next) ? next : '/ui'
}

/** The /ui routes, to mount at `/`; `sessions` is the store the API's auth reads the cookie from too. */
export function uiRoutes(
  service: Pick<Service, 'authenticate'>,
  sessions: Sessions,
  ttlMs = DEFAULT_SESSION_TTL_MS,
): Hono {
  const app = new Hono()
  const files = loadFiles()
  const file = (name: string) => files.get(name) as string

  const headers: MiddlewareHandler = async (c, next) => {
    await next()
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value)
  }
  app.use('/ui', headers)
  app.use('/ui/*', headers)

  const page = (c: Context, name: string, status: 200 | 401 = 200) =>
    c.body(file(name), status, { 'Content-Type': TYPES.html as string, 'Cache-Control': 'no-store' })
  const loginPage = (c: Context, message: keyof typeof LOGIN_MESSAGES, next: string, status: 200 | 401) => {
    // Only fixed texts and a path safeNext allowed are put in: nothing a request says goes in as markup.
    const html = file('login.html')
      .replace('{{message}}', LOGIN_MESSAGES[message])
      .replace('{{next}}', safeNext(next))
    return c.body(html, status, { 'Content-Type': TYPES.html as string, 'Cache-Control': 'no-store' })
  }
  const toLogin = (c: Context, next: string) => {
    const expired = getCookie(c, cookieName(c)) !== undefined
    if (expired) deleteCookie(c, cookieName(c), { path: '/', secure: overTls(c) })
    return c.redirect(`/ui/login?next=${encodeURIComponent(next)}${expired ? '&m=expired' : ''}`, 303)
  }

  app.get('/ui', (c) => (sessionOf(c, sessions) ? page(c, 'runs.html') : toLogin(c, '/ui')))
  app.get('/ui/', (c) => c.redirect('/ui', 301))
  app.get('/ui/runs/:id', (c) =>
    sessionOf(c, sessions) ? page(c, 'run.html') : toLogin(c, safeNext(`/ui/runs/${c.req.param('id')}`)),
  )
  app.get('/ui/login', (c) => {
    const m = c.req.query('m')
    const message = m === 'expired' || m === 'out' ? m : 'none'
    return loginPage(c, message, c.req.query('next') ?? '/ui', 200)
  })
  for (const name of ASSETS) {
    const type = TYPES[name.slice(name.lastIndexOf('.') + 1)] as string
    app.get(`/ui/assets/${name}`, (c) =>
      c.body(file(name), 200, { 'Content-Type': type, 'Cache-Control': 'no-cache' }),
    )
  }

  const small = bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.text('too large', 413) })
  // The sign-in page's script posts the form and asks for JSON: the answer carries the page token, which
  // the page keeps (localStorage, this origin's only). A plain form post (no script) gets the cookie and
  // the redirect, and no page token: the dashboard then sends it back here.
  app.post('/ui/session', small, async (c) => {
    if (!sameOrigin(c)) return c.text('cross-origin sign-in refused', 403)
    const form = await c.req.parseBody()
    const token = typeof form.key === 'string' ? form.key.trim() : ''
    const next = typeof form.next === 'string' ? form.next : '/ui'
    const key = token ? service.authenticate(token) : null
    const json = (c.req.header('accept') ?? '').includes('application/json')
    if (!key) {
      if (json) return c.json({ error: { code: 'unauthorized', message: LOGIN_MESSAGES.bad } }, 401)
      return loginPage(c, 'bad', next, 401)
    }
    const name = cookieName(c)
    const old = getCookie(c, name)
    if (old) sessions.delete(old)
    const made = sessions.create(token, key)
    setCookie(c, name, made.id, {
      httpOnly: true,
      sameSite: 'Strict',
      path: '/',
      secure: overTls(c),
      maxAge: Math.floor(ttlMs / 1000),
    })
    c.header('Cache-Control', 'no-store')
    if (json) return c.json({ token: made.pageToken, next: safeNext(next) })
    return c.redirect(safeNext(next), 303)
  })
  app.post('/ui/logout', small, (c) => {
    if (!sameOrigin(c)) return c.text('cross-origin sign-out refused', 403)
    const name = cookieName(c)
    const id = getCookie(c, name)
    if (id) sessions.delete(id)
    deleteCookie(c, name, { path: '/', secure: overTls(c) })
    return c.redirect('/ui/login?m=out', 303)
  })
  return app
}
