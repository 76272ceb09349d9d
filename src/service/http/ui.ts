// The web dashboard: `/ui` (the runs) and `/ui/runs/{id}` (one run, live), plain HTML, ES modules and CSS
// from src/service/ui/ (copied into dist/service/ui/ by the build: nothing is built on the user's machine),
// read once at start-up. The page talks to the same /v1 API as any client.
//
// Auth is the API's: the browser posts a key once (`POST /ui/session`) and gets a random session id in an
// HttpOnly, SameSite=Strict cookie, because an EventSource cannot send an Authorization header. Sessions
// live in this process's memory only (a restart logs everyone out): each maps to the key's token, so every
// request authenticates the key again and a revoked key ends its sessions at their next request (and its
// event streams at their next heartbeat). A state-changing request authenticated by the cookie must also
// prove it came from the page (see csrfOk).
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { type Context, Hono, type MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import type { KeyRecord, Service } from '../types.js'

export const SESSION_COOKIE = 'cordon_session'
/** The header the page sets on its state-changing requests (a cross-site form or fetch cannot set it). */
export const CSRF_HEADER = 'x-cordon-csrf'
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
}

export interface SessionOf {
  id: string
  key: KeyRecord
  token: string
}

export interface Sessions {
  /** A new session for a key's token: its id, for the cookie. */
  create(token: string, key: KeyRecord): string
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
      sessions.set(id, { token, keyId: key.id, expiresAt: now() + ttlMs })
      const set = byKey.get(key.id) ?? new Set<string>()
      set.add(id)
      byKey.set(key.id, set)
      return id
    },
    check(id) {
      const session = sessions.get(id)
      if (!session) return null
      const key = session.expiresAt > now() ? service.authenticate(session.token) : null
      if (!key || key.id !== session.keyId) {
        forget(id)
        return null
      }
      return { id, key, token: session.token }
    },
    delete(id) {
      forget(id)
    },
    get size() {
      return sessions.size
    },
  }
}

/** The session a request's cookie names, when it is live and its key valid. */
export function sessionOf(c: Context, sessions: Sessions): SessionOf | null {
  const id = getCookie(c, SESSION_COOKIE)
  return id ? sessions.check(id) : null
}

/** The request's Origin (when sent) names this very host. */
function sameOrigin(c: Context): boolean {
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

/**
 * A cookie-authenticated request that changes state came from the dashboard: its Origin, when the browser
 * sends one, is this server's, and it carries the page's custom header or a same-origin Origin. A cross-site
 * form can set neither; a cross-site fetch cannot add the header without a CORS preflight, which this server
 * never grants. (SameSite=Strict already keeps the cookie off cross-site requests; this is the second lock.)
 */
export function csrfOk(c: Context): boolean {
  if (!sameOrigin(c)) return false
  return c.req.header(CSRF_HEADER) !== undefined || c.req.header('origin') !== undefined
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
const ASSETS = ['style.css', 'common.js', 'runs.js', 'run.js', 'icon.svg']
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
    const expired = getCookie(c, SESSION_COOKIE) !== undefined
    if (expired) deleteCookie(c, SESSION_COOKIE, { path: '/' })
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
  app.post('/ui/session', small, async (c) => {
    if (!sameOrigin(c)) return c.text('cross-origin sign-in refused', 403)
    const form = await c.req.parseBody()
    const token = typeof form.key === 'string' ? form.key.trim() : ''
    const next = typeof form.next === 'string' ? form.next : '/ui'
    const key = token ? service.authenticate(token) : null
    if (!key) return loginPage(c, 'bad', next, 401)
    const old = getCookie(c, SESSION_COOKIE)
    if (old) sessions.delete(old)
    const secure = new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https'
    setCookie(c, SESSION_COOKIE, sessions.create(token, key), {
      httpOnly: true,
      sameSite: 'Strict',
      path: '/',
      secure,
      maxAge: Math.floor(ttlMs / 1000),
    })
    return c.redirect(safeNext(next), 303)
  })
  app.post('/ui/logout', small, (c) => {
    if (!sameOrigin(c)) return c.text('cross-origin sign-out refused', 403)
    const id = getCookie(c, SESSION_COOKIE)
    if (id) sessions.delete(id)
    deleteCookie(c, SESSION_COOKIE, { path: '/' })
    return c.redirect('/ui/login?m=out', 303)
  })
  return app
}
