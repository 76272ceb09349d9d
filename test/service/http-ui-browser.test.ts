// test: slow (drives Debian's chromium)
// The dashboard end to end in a real browser: Debian's headless chromium driven by playwright-core, against
// the built `cordon serve`. Signs in, starts a run from the form and watches its output arrive, cancels a
// run, reads a timeout in words, renders hostile output as text, saves the full output, checks that the
// session cookie a service on another port of the host receives is worth nothing there, and that the
// page's event reader gets every event to `end`, resuming with Last-Event-ID after the connection is cut
// mid-output. Screenshots of both pages go to test-artifacts/ (ignored by git).
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, statSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { BrowserContext, Page } from 'playwright-core'
import { noNamespace, processesWith, type Served, startServe, tempDir, waitFor } from '../helpers.js'

const CHROMIUM = ['/usr/bin/chromium', '/usr/lib/chromium/chromium'].find((p) => existsSync(p))
const playwright = await import('playwright-core').catch(() => null)
const skip = !CHROMIUM
  ? 'chromium is not installed (Debian: apt-get install chromium)'
  : !playwright
    ? 'playwright-core is not installed (npm ci)'
    : noNamespace
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url))

type Json = Record<string, unknown>

describe('the dashboard in a browser', { skip, timeout: 120_000 }, () => {
  let served: Served
  let context: BrowserContext
  let page: Page
  let profile: string

  const api = async (route: string, init: { method?: string; body?: unknown; key?: string } = {}) => {
    const res = await fetch(`${served.url}${route}`, {
      method: init.method ?? 'GET',
      headers: { authorization: `Bearer ${init.key ?? served.adminKey}` },
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    })
    assert.ok(res.ok, `${route}: ${res.status} ${await res.clone().text()}`)
    return (await res.json()) as Json
  }
  const text = (selector: string) => page.locator(selector).innerText()

  before(async () => {
    served = await startServe(tempDir('cordon-ui-browser-'))
    profile = tempDir('cordon-chromium-')
    context = await (playwright as typeof import('playwright-core')).chromium.launchPersistentContext(
      profile,
      {
        executablePath: CHROMIUM as string,
        headless: true,
        // Chromium's own sandbox cannot start as root (these tests run as root in CI): it refuses to run
        // without --no-sandbox. The page only ever loads this test's server.
        args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
        viewport: { width: 1100, height: 800 },
      },
    )
    page = context.pages()[0] ?? (await context.newPage())
    mkdirSync(ARTIFACTS, { recursive: true })
  })
  after(async () => {
    await context?.close()
    // No chromium of this test is left behind.
    if (profile)
      assert.ok(await waitFor(() => processesWith(profile).length === 0, 5000), 'chromium left running')
    served?.child.kill('SIGTERM')
    await served?.exited
  })

  it('signs in with a key, starts a run from the form, and shows its output live, then its verdict', async () => {
    await page.goto(`${served.url}/ui`)
    assert.match(page.url(), /\/ui\/login\?next=%2Fui$/)
    await page.getByLabel('API key').fill(served.adminKey as string)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(`${served.url}/ui`)

    await page.locator('#start summary').click()
    await page
      .getByLabel('Command')
      .fill(
        'echo \'{"level":"warn","msg":"<b>logged</b>","n":1}\' >&$CORDON_LOG_FD; ' +
          'for i in 1 2 3; do echo tick-$i; sleep 0.5; done; printf "\\033[31mred\\033[0m\\n"; echo oops >&2; exit 3',
      )
    await page.getByLabel('Wall time').fill('20s')
    await page.getByLabel('Metadata').first().fill('from=browser')
    await page.getByRole('button', { name: 'Start', exact: true }).click()
    await page.waitForURL(/\/ui\/runs\/[^/]+$/)

    // Live: the first line is on the page while the run still runs.
    await page.locator('#out', { hasText: 'tick-1' }).waitFor()
    assert.notEqual(await text('#state'), 'finished', 'output seen before the run ended')
    await page.locator('#status', { hasText: 'nonzero-exit' }).waitFor({ timeout: 20_000 })
    assert.equal(await text('#verdict'), 'nonzero-exit: exit code 3')
    assert.equal(await text('#state'), 'finished')
    assert.equal(await page.locator('#out .s-stderr').innerText(), 'oops\n')
    assert.equal(await page.locator('#out .a31').innerText(), 'red')
    assert.match(await text('#out'), /tick-1\ntick-2\ntick-3\nred\noops\n/)
    assert.ok(await page.locator('#cancel').isDisabled())
    assert.equal(await page.locator('#logs tbody tr').innerText(), 'warn\t<b>logged</b>\t{"n":1}')
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-run.png'), fullPage: true })
    await page.emulateMedia({ colorScheme: 'dark' })
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-run-dark.png'), fullPage: true })
    await page.emulateMedia({ colorScheme: 'light' })

    // The lines view: numbered, timed from the run's start, searchable (colours and escapes left out).
    await page.getByLabel('lines, numbered and timed').check()
    await page.locator('#lines .line').nth(4).waitFor()
    const lines = await page.locator('#lines .line').allInnerTexts()
    assert.equal(lines.length, 5, lines.join('|'))
    assert.match(lines[0] as string, /^1\s+\+\d+\.\d{3}s\s+tick-1$/)
    assert.match(lines[3] as string, /^4\s+\+\d+\.\d{3}s\s+red$/)
    assert.ok(await page.locator('#out').isHidden())
    await page.getByLabel('Search').fill('TICK-2')
    await page.locator('#search-count', { hasText: '1 line match' }).waitFor()
    assert.match(await text('#lines'), /^2\s+\+\d+\.\d{3}s\s+tick-2$/)
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-run-lines.png'), fullPage: true })
    await page.getByLabel('Search').fill('')
    await page.getByLabel('text', { exact: true }).check()
    assert.ok(await page.locator('#out').isVisible())
  })

  it('shows new runs and their state changes in the list without a reload, and filters it', async () => {
    await page.goto(`${served.url}/ui`)
    await page.locator('#runs tbody tr').first().waitFor()
    const run = await api('/v1/runs', {
      method: 'POST',
      body: { cmd: ['sleep', '1'], metadata: { list: 'live' } },
    })
    const row = page.locator('#runs tbody tr', { hasText: String(run.id) })
    await row.waitFor({ timeout: 10_000 })
    await row.getByRole('cell', { name: 'ok', exact: true }).waitFor({ timeout: 20_000 })
    assert.match(await row.innerText(), /finished/)
    await page.locator('#q-meta').fill('list=live')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.waitForURL(/metadata=list%3Dlive/)
    // The next answer is the filtered list (one in flight may still show the whole one for a moment).
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr').length === 1)
    assert.match(await page.locator('#runs tbody tr').innerText(), /list=live/)

    // Pages: two runs a page, older and back to newer.
    // Finished before the pages are read, so a page reads the same both times.
    for (const _ of [1, 2, 3])
      await api('/v1/runs', {
        method: 'POST',
        body: { cmd: ['true'], metadata: { pages: 'p' }, wait: '20s' },
      })
    await page.goto(`${served.url}/ui?metadata=pages%3Dp&limit=2`)
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr').length === 2)
    const first = await text('#runs tbody')
    await page.getByRole('button', { name: 'Older' }).click()
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr').length === 1)
    assert.ok(await page.getByRole('button', { name: 'Older' }).isDisabled())
    await page.getByRole('button', { name: 'Newer' }).click()
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr').length === 2)
    assert.equal(await text('#runs tbody'), first)
    // Every control has a name a screen reader says.
    const unnamed =
      await page.evaluate(`[...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
      .filter((e) => e.labels?.length === 0 && !e.textContent.trim() && !e.getAttribute('aria-label'))
      .map((e) => e.outerHTML)`)
    assert.deepEqual(unnamed, [])
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-runs.png'), fullPage: true })
  })

  it('lists runs by command, name, coloured status and duration, live over SSE without polling', async () => {
    const errors: string[] = []
    const onConsole = (m: { type(): string; text(): string }) => {
      if (m.type() === 'error') errors.push(m.text())
    }
    const onError = (e: Error) => errors.push(String(e))
    page.on('console', onConsole)
    page.on('pageerror', onError)
    const lists: string[] = []
    const onRequest = (r: { url(): string }) => {
      if (/\/v1\/runs(\?|$)/.test(new URL(r.url()).pathname + new URL(r.url()).search)) lists.push(r.url())
    }
    page.on('request', onRequest)
    try {
      await page.goto(`${served.url}/ui`)
      await page.locator('#live', { hasText: 'Live' }).waitFor({ timeout: 10_000 })
      // The form takes the schema's units as the CLI does: a bare number is refused, naming the unit.
      await page.locator('#start summary').click()
      await page.getByLabel('Command').fill('echo named')
      assert.equal(await page.getByLabel('Wall time').getAttribute('placeholder'), '30s')
      await page.getByLabel('Wall time').fill('10')
      await page.getByRole('button', { name: 'Start', exact: true }).click()
      await page.locator('#run-error', { hasText: 'Wall time: "10" needs a unit: 10s or 10ms' }).waitFor()
      assert.match(page.url(), /\/ui$/)
      // The network choice is the key's: the admin key has no network ceiling, so `none` only.
      assert.deepEqual(await page.locator('#f-net option').allInnerTexts(), ['none'])
      await page.getByLabel('Wall time').fill('20s')
      await page.getByLabel('Name').fill('the named one')
      await page.getByRole('button', { name: 'Start', exact: true }).click()
      await page.waitForURL(/\/ui\/runs\/[^/]+$/)
      const runId = page.url().split('/').pop() as string
      // The run page is titled by its command, shows the limits in force, hides its empty panes.
      await page.locator('#status', { hasText: 'ok' }).waitFor({ timeout: 20_000 })
      assert.equal(await page.title(), "sh -c 'echo named' · cordon")
      assert.equal(await text('#title'), "sh -c 'echo named'")
      assert.equal(await text('#name'), 'the named one')
      await page.locator('#limits dd', { hasText: '20s' }).waitFor()
      assert.match(await text('#limits'), /Memory\s+512M/)
      assert.ok(await page.locator('#logs-pane').isHidden(), 'no logs: no Logs pane')
      assert.ok(await page.locator('#net-pane').isHidden(), 'no connections: no Network pane')
      const saved = page.waitForEvent('download')
      await page.getByRole('button', { name: 'Download stdout' }).click()
      const file = await (await saved).path()
      assert.equal((await import('node:fs')).readFileSync(file, 'utf8'), 'named\n')
      await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-run-named.png'), fullPage: true })

      // The list: command, name, a coloured status, a duration.
      await page.goto(`${served.url}/ui`)
      const row = page.locator(`#runs tbody tr[data-id="${runId}"]`)
      await row.waitFor({ timeout: 10_000 })
      assert.match(await row.innerText(), /the named one/)
      assert.match(await row.innerText(), /sh -c 'echo named'/)
      assert.equal(await row.locator('td').nth(2).getAttribute('class'), 'st-ok')
      assert.match(await row.locator('td').nth(4).innerText(), /\d/)

      // Live over the feed: a new run appears and counts up while running, with no list read again.
      lists.length = 0
      const slow = await api('/v1/runs', {
        method: 'POST',
        body: { cmd: ['sleep', '3'], metadata: { name: 'slow' } },
      })
      const slowRow = page.locator(`#runs tbody tr[data-id="${slow.id}"]`)
      await slowRow.locator('td', { hasText: 'running' }).waitFor({ timeout: 10_000 })
      await slowRow.locator('td.elapsed', { hasText: /^[1-9]\d*s$/ }).waitFor({ timeout: 10_000 })
      await slowRow.locator('td', { hasText: 'ok' }).waitFor({ timeout: 20_000 })
      assert.deepEqual(lists, [], 'the list is not polled')

      // Keyboard: Tab reaches a run's link, Enter opens it.
      await page.locator('#q-meta').focus()
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press('Tab')
        if (await page.evaluate(() => !!document.activeElement?.closest('#runs tbody a'))) break
      }
      assert.ok(
        await page.evaluate(() => !!document.activeElement?.closest('#runs tbody a')),
        'a run link takes focus',
      )
      await page.keyboard.press('Enter')
      await page.waitForURL(/\/ui\/runs\/[^/]+$/)

      // Run again: the same request, a new run.
      await page.goto(`${served.url}/ui/runs/${runId}`)
      await page.getByRole('button', { name: 'Run again' }).click()
      await page.waitForURL((u) => /\/ui\/runs\/[^/]+$/.test(u.pathname) && !u.pathname.endsWith(runId))
      await page.locator('#title', { hasText: 'echo named' }).waitFor()

      // A phone: nothing wider than the screen.
      await page.setViewportSize({ width: 390, height: 844 })
      for (const route of ['/ui', `/ui/runs/${runId}`]) {
        await page.goto(`${served.url}${route}`)
        await page.locator('#title, #runs tbody tr').first().waitFor()
        const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
        assert.ok(wide <= 1, `${route} is ${wide}px wider than a phone`)
        const name = route === '/ui' ? 'dashboard-runs-phone.png' : 'dashboard-run-phone.png'
        await page.screenshot({ path: path.join(ARTIFACTS, name), fullPage: true })
      }
      assert.deepEqual(errors, [], 'no console errors')
    } finally {
      await page.setViewportSize({ width: 1100, height: 800 })
      page.off('console', onConsole)
      page.off('pageerror', onError)
      page.off('request', onRequest)
    }
  })

  it('cancels a running run with its button and shows it canceled; says a timeout in words', async () => {
    const run = await api('/v1/runs', { method: 'POST', body: { cmd: ['sh', '-c', 'echo up; sleep 30'] } })
    await page.goto(`${served.url}/ui/runs/${run.id}`)
    await page.locator('#out', { hasText: 'up' }).waitFor({ timeout: 10_000 })
    // From the keyboard.
    await page.getByRole('button', { name: 'Cancel run' }).focus()
    await page.keyboard.press('Enter')
    await page.locator('#status', { hasText: 'canceled' }).waitFor({ timeout: 10_000 })
    assert.match(await text('#verdict'), /^canceled: /)

    const slow = await api('/v1/runs', {
      method: 'POST',
      body: { cmd: ['sleep', '10'], options: { limits: { wallTimeMs: '1s' } } },
    })
    await page.goto(`${served.url}/ui/runs/${slow.id}`)
    await page.locator('#status', { hasText: 'timeout' }).waitFor({ timeout: 15_000 })
    assert.equal(await text('#verdict'), 'timeout: wall time exceeded 1s')
  })

  it('says beside the verdict which connections the network policy refused, and which allowed one failed', async () => {
    // A key granted the network by name (the admin key has none); the admin's page shows its run.
    const { key } = await api('/v1/keys', {
      method: 'POST',
      body: { name: 'net', scopes: ['runs:write', 'runs:read'], ceilings: { network: 'host' } },
    })
    const run = await api('/v1/runs', {
      method: 'POST',
      key: key as string,
      body: {
        cmd: [
          'sh',
          '-c',
          'curl -s -p http://evil.test/; curl -s -p http://no-such-name.invalid/; curl -s -p http://[::ffff:7f00:1]/; exit 7',
        ],
        options: { network: { allow: ['no-such-name.invalid'] }, limits: { wallTimeMs: '30s' } },
      },
    })
    await page.goto(`${served.url}/ui/runs/${run.id}`)
    await page.locator('#status', { hasText: 'nonzero-exit' }).waitFor({ timeout: 30_000 })
    assert.equal(await text('#verdict'), 'nonzero-exit: exit code 7')
    // The events arrive one by one: the line is whole once the last is in.
    const whole =
      'The network policy refused 2 connections: evil.test:80 (not-allowed), [::ffff:7f00:1]:80 (not-allowed). ' +
      'Allowed but failed: 1 connection: no-such-name.invalid:80 (unresolvable).'
    await page.locator('#refused', { hasText: whole }).waitFor({ timeout: 10_000 })
    // Linked to the failure it caused, and to the connections.
    await page.locator('#refused', { hasText: 'This failure may be' }).waitFor({ timeout: 10_000 })
    assert.equal(
      await text('#refused'),
      `This failure may be the network policy’s: ${whole} See the connections`,
    )
    assert.equal(await page.locator('#refused a').getAttribute('href'), '#net-h')
    assert.ok(await page.locator('#net-pane').isVisible())
    assert.match(
      await page.locator('#network tbody tr').first().innerText(),
      /not-allowed: not on the allow list/,
    )
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-run-refused.png'), fullPage: true })
    // Seen again from the run's page alone (its events replayed), it says the same.
    await page.reload()
    await page.locator('#refused', { hasText: whole }).waitFor({ timeout: 10_000 })
  })

  it('renders hostile output as text and stays responsive past a 10 MB line', async (t) => {
    const script = [
      `printf '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">\\n'`,
      `printf '\\033]0;retitled\\007\\033[2J\\033[32mgreen\\033[0m\\n'`,
      `head -c 10000000 /dev/zero | tr '\\0' a`,
      'echo',
      'echo done-marker',
    ].join('; ')
    const run = await api('/v1/runs', {
      method: 'POST',
      body: { cmd: ['sh', '-c', script], options: { limits: { maxOutputBytes: '16M', wallTimeMs: '60s' } } },
    })
    await page.goto(`${served.url}/ui/runs/${run.id}`)
    // The longest gap between two frames while the output pours in: the page keeps drawing.
    const gap = page.evaluate(`new Promise((resolve) => {
      let last = performance.now()
      let longest = 0
      const tick = (now) => {
        longest = Math.max(longest, now - last)
        last = now
        if (document.getElementById('status').textContent) resolve(longest)
        else requestAnimationFrame(tick)
      }
      requestAnimationFrame(tick)
    })`) as Promise<number>
    await page.locator('#out', { hasText: 'done-marker' }).waitFor({ timeout: 45_000 })
    await page.locator('#status', { hasText: 'ok' }).waitFor({ timeout: 10_000 })
    const seen = await page.evaluate(() => ({
      pwned: (window as unknown as { pwned?: number }).pwned,
      tags: document.querySelectorAll('#out script, #out img').length,
      chars: document.getElementById('out')?.textContent?.length ?? 0,
      title: document.title,
    }))
    assert.equal(seen.pwned, undefined)
    assert.equal(seen.tags, 0)
    assert.ok(seen.chars <= 256 * 1024, `the page keeps at most 256 KiB of output, not ${seen.chars}`)
    // Titled by its command, as text: the output's OSC escape did not retitle it, the command's markup is text.
    assert.match(seen.title, /^sh -c .*<script>.* · cordon$/)
    assert.notEqual(seen.title, 'retitled')
    assert.ok(await page.locator('#clipped').isVisible(), 'it says it shows only the last part')
    // The full output (up to 8 MiB) is saved: fetched with the page token, as a link could not be.
    const [saved] = await Promise.all([page.waitForEvent('download'), page.locator('#full').click()])
    const file = path.join(profile, 'full-output.txt')
    await saved.saveAs(file)
    assert.equal(statSync(file).size, 8 * 1024 * 1024)
    const longest = await gap
    t.diagnostic(`longest frame gap while 10 MB came in: ${Math.round(longest)} ms`)
    assert.ok(longest < 2000, `a frame took ${Math.round(longest)} ms`)

    // The markup is on the page as text (the first lines were clipped: read them from a fresh run).
    const small = await api('/v1/runs', {
      method: 'POST',
      body: { cmd: ['sh', '-c', script.split('; head')[0] as string] },
    })
    await page.goto(`${served.url}/ui/runs/${small.id}`)
    await page.locator('#out', { hasText: 'green' }).waitFor({ timeout: 10_000 })
    assert.match(
      await text('#out'),
      /^<script>window\.pwned=1<\/script><img src=x onerror="window\.pwned=2">\ngreen\n/,
    )
    assert.equal(await page.locator('#out .a32').innerText(), 'green')
    assert.equal(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned), undefined)
  })

  it('stays responsive when every other character changes colour', async (t) => {
    // 4 MB of `a` and `b` in alternating colours: a span for every character or two, were each kept.
    const script = `yes "$(printf '\\033[31ma\\033[32mb')" | head -c 4000000; echo; echo colour-done`
    const run = await api('/v1/runs', {
      method: 'POST',
      body: { cmd: ['sh', '-c', script], options: { limits: { maxOutputBytes: '16M', wallTimeMs: '60s' } } },
    })
    await page.goto(`${served.url}/ui/runs/${run.id}`)
    if (page.url().includes('/ui/login')) {
      await page.getByLabel('API key').fill(served.adminKey as string)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL(`${served.url}/ui/runs/${run.id}`)
    }
    // The longest gap between two frames until the last line is on the page.
    const longest = (await page.evaluate(`new Promise((resolve) => {
      let last = performance.now()
      let longest = 0
      const tick = (now) => {
        longest = Math.max(longest, now - last)
        last = now
        if (document.getElementById('out').lastChild?.textContent.includes('colour-done')) resolve(longest)
        else requestAnimationFrame(tick)
      }
      requestAnimationFrame(tick)
    })`)) as number
    const spans = await page.evaluate(() => document.getElementById('out')?.childElementCount ?? 0)
    t.diagnostic(`${spans} spans; longest frame gap: ${Math.round(longest)} ms`)
    // What keeps the page responsive is the bound on spans; the frame gap is checked only against a freeze
    // (a loaded shared machine showed 2-6 s gaps on a sound page, so a tighter figure belongs in a bench).
    assert.ok(spans <= 5000, `${spans} spans in the page`)
    assert.ok(longest < 15_000, `a frame took ${Math.round(longest)} ms`)
    // Once it is all in, the page answers at once (with 170 000 spans, a call took a second).
    const start = Date.now()
    await page.evaluate(() => document.getElementById('out')?.scrollTo(0, 0))
    assert.ok(Date.now() - start < 3000, `the page took ${Date.now() - start} ms to answer`)
  })

  it('gives a service on another port of the host a cookie that authenticates nothing', async () => {
    // A cookie is the host's, whatever the port: another service there receives it with every request the
    // browser makes to it. Replayed from there with the CSRF header and this server's Origin, it made an
    // admin key. The page token it would need is in this origin's storage, which that page cannot read.
    const cookies: string[] = []
    const foreign = http.createServer((req, res) => {
      cookies.push(req.headers.cookie ?? '')
      res.writeHead(200, { 'content-type': 'text/html' })
      res.end('<!doctype html><title>another service</title><p>hello</p>')
    })
    await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve))
    const foreignUrl = `http://127.0.0.1:${(foreign.address() as net.AddressInfo).port}`
    try {
      await page.goto(`${served.url}/ui`)
      await page.locator('#runs tbody tr').first().waitFor()
      const mine = await page.evaluate(() => localStorage.getItem('cordon.session'))
      assert.match(String(mine), /^[\w-]{43}$/, 'the page keeps its token')
      await page.goto(foreignUrl)
      const cookie = /(?:^|;\s*)(cordon_session=[^;]+)/.exec(cookies.join('; '))?.[1]
      assert.ok(cookie, `the browser sent the session cookie to another port: ${JSON.stringify(cookies)}`)
      assert.equal(await page.evaluate(() => localStorage.getItem('cordon.session')), null)
      // The page of the other port, in the browser: its request to /v1 is refused (another origin).
      const fromPage = (await page.evaluate(`fetch('${served.url}/v1/keys', {
        method: 'POST', mode: 'no-cors', credentials: 'include',
        body: JSON.stringify({ name: 'stolen-page', scopes: ['admin'] }),
      }).then(() => 'sent', (e) => String(e))`)) as string
      assert.equal(fromPage, 'sent')
      // The other service itself, replaying the cookie with every header the page would have sent.
      const replay = await fetch(`${served.url}/v1/keys`, {
        method: 'POST',
        headers: {
          cookie,
          'x-cordon-csrf': '1',
          origin: served.url,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ name: 'stolen', scopes: ['admin'] }),
      })
      assert.equal(replay.status, 401)
      const read = await fetch(`${served.url}/v1/runs`, { headers: { cookie } })
      assert.equal(read.status, 401)
      const keys = (await api('/v1/keys')) as { keys: { name: string }[] }
      assert.deepEqual(
        keys.keys.filter((k) => k.name.startsWith('stolen')),
        [],
        'no key was made',
      )
      // The dashboard itself still works with its token.
      await page.goto(`${served.url}/ui`)
      await page.locator('#runs tbody tr').first().waitFor()
      assert.equal(await page.locator('#list-error').innerText(), '')
    } finally {
      foreign.close()
    }
  })

  it("lets the page's event reader get every event to end, resuming exactly once after a cut", async () => {
    // A proxy in front of the server that cuts the first event stream after its 5th output event.
    // Each event request's Last-Event-ID (null without one), in the order they came, on any connection.
    const lastIds: (string | null)[] = []
    const eventHead = /GET \/v1\/runs\/[^/\s]+\/events[^\r\n]*\r\n((?:[^\r\n]+\r\n)*)\r\n/g
    let cut = false
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(new URL(served.url).port), '127.0.0.1')
      let outputs = 0
      let sent = ''
      let seen = 0
      client.on('data', (b: Buffer) => {
        // What the browser sent, for the event requests' heads (bodies are small form posts).
        sent += b.toString('latin1')
        const found = [...sent.matchAll(eventHead)]
        for (const m of found.slice(seen))
          lastIds.push(/^last-event-id: *(\S+)/im.exec(m[1] as string)?.[1] ?? null)
        seen = found.length
        upstream.write(b)
      })
      upstream.on('data', (b: Buffer) => {
        client.write(b)
        outputs += b.toString('latin1').split('event: output').length - 1
        if (!cut && outputs >= 5) {
          cut = true
          client.destroy()
          upstream.destroy()
        }
      })
      const end = () => {
        client.destroy()
        upstream.destroy()
      }
      client.on('error', end).on('close', end)
      upstream.on('error', end).on('close', end)
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`
    try {
      // The dashboard through the proxy: an origin of its own, signed in there (its own page token).
      await page.goto(`${proxyUrl}/ui`)
      await page.getByLabel('API key').fill(served.adminKey as string)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForURL(`${proxyUrl}/ui`)
      const run = await api('/v1/runs', {
        method: 'POST',
        body: {
          cmd: ['sh', '-c', 'sleep 1; for i in $(seq 1 40); do printf "line-%03d\\n" $i; sleep 0.05; done'],
        },
      })
      await page.goto(`${proxyUrl}/ui/runs/${run.id}`)
      await page.locator('#status', { hasText: 'ok' }).waitFor({ timeout: 30_000 })
      const expected = Array.from({ length: 40 }, (_, i) => `line-${String(i + 1).padStart(3, '0')}\n`).join(
        '',
      )
      assert.equal(await page.locator('#out').innerText(), expected, 'every line exactly once, in order')
      assert.ok(cut, 'the stream was cut')
      assert.equal(lastIds.length, 2, `two requests: ${JSON.stringify(lastIds)}`)
      assert.equal(lastIds[0], null)
      assert.ok(Number(lastIds[1]) >= 1, `resumed with Last-Event-ID ${lastIds[1]}`)
    } finally {
      proxy.close()
    }
  })

  it('offers a key with an allowlist ceiling an allowlist within it, and runs with it', async () => {
    const { key } = await api('/v1/keys', {
      method: 'POST',
      body: {
        name: 'allow',
        scopes: ['runs:write', 'runs:read'],
        ceilings: { network: { allow: ['example.com'] } },
      },
    })
    await page.goto(`${served.url}/ui/login`)
    await page.getByLabel('API key').fill(key as string)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(`${served.url}/ui`)
    await page.locator('#start summary').click()
    await page.locator('#f-net option[value="allow"]').waitFor({ state: 'attached' })
    assert.deepEqual(await page.locator('#f-net option').allInnerTexts(), [
      'none',
      'allowlist (through the proxy)',
    ])
    assert.ok(await page.getByLabel('Allowed hosts').isHidden())
    await page.getByLabel('Network').selectOption('allow')
    await page.getByLabel('Allowed hosts').fill('example.com')
    assert.match(await text('#allow-hint'), /Within this key's: example\.com/)
    await page.getByLabel('Command').fill('true')
    await page.getByRole('button', { name: 'Start', exact: true }).click()
    await page.waitForURL(/\/ui\/runs\/[^/]+$/)
    await page.locator('#limits dd', { hasText: 'allow example.com' }).waitFor({ timeout: 10_000 })
  })
})
