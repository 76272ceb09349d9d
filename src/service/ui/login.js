// The sign-in page: posts the key and asks for JSON, whose answer carries the session's page token. The
// token is kept in this origin's storage, which no page of another origin (another port of this host
// included) can read, and every /v1 request sends it with the cookie (common.js).
import { keepSessionToken } from './common.js'

const form = document.querySelector('form')
const message = document.querySelector('.message')

form.addEventListener('submit', async (event) => {
  event.preventDefault()
  const button = form.querySelector('button[type="submit"]')
  button.disabled = true
  try {
    const res = await fetch('/ui/session', {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams(new FormData(form)),
      credentials: 'same-origin',
    })
    const body = await res.json().catch(() => ({}))
    if (!res.ok || typeof body.token !== 'string') {
      message.textContent = body.error?.message ?? `Signing in failed (HTTP ${res.status}).`
      return
    }
    keepSessionToken(body.token)
    location.assign(body.next)
  } catch (error) {
    message.textContent = String(error)
  } finally {
    button.disabled = false
  }
})
