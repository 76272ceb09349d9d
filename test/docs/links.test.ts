// Every relative link in the repository's Markdown (README, top-level docs, docs/) names a file that
// exists, and a `#fragment` names a heading of that file (GitHub's anchors), so moved docs cannot rot.
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

const markdownFiles = (): string[] => [
  ...readdirSync(ROOT)
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join(ROOT, f)),
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join(ROOT, 'docs', f)),
]

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-')
}

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  let fenced = false
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('```')) fenced = !fenced
    const m = !fenced && /^#{1,6} (.*)$/.exec(line)
    if (!m) continue
    const base = slug(m[1]!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

/** Links outside code: `[text](target)`, the target without a title. */
function links(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '')
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!)
}

test('relative links in Markdown files resolve', () => {
  const broken: string[] = []
  for (const file of markdownFiles()) {
    for (const link of links(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue // http:, https:, mailto:
      const [target, fragment] = link.split('#') as [string, string | undefined]
      const resolved = target === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(target))
      const where = `${path.relative(ROOT, file)}: ${link}`
      if (!existsSync(resolved)) broken.push(`${where} (no such file)`)
      else if (fragment && resolved.endsWith('.md') && statSync(resolved).isFile()) {
        if (!anchors(resolved).has(fragment)) broken.push(`${where} (no such heading)`)
      }
    }
  }
  assert.deepEqual(broken, [], `broken links:\n${broken.join('\n')}`)
})

test('the slugs follow GitHub', () => {
  assert.equal(slug('Kernel accounting and hardening'), 'kernel-accounting-and-hardening')
  assert.equal(slug('`limits`'), 'limits')
  assert.equal(slug('Many runs from one host: a spawner'), 'many-runs-from-one-host-a-spawner')
  assert.equal(slug('Tool functions, redaction, clock'), 'tool-functions-redaction-clock')
})
