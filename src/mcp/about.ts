// What this MCP server says of itself: its version, and, in the run tool's text, the limits and hosts its
// key and server hold a run to (a model that reads "the server's limits" cannot plan a build within them),
// and that each call is a fresh sandbox.
import { readFileSync } from 'node:fs'
import { formatLimit } from '../index.js'
import type { RunBounds } from '../service/types.js'

/** The package's version: package.json is two levels up from both src/mcp/ and dist/mcp/. */
export function packageVersion(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    const version = (pkg as { version?: unknown }).version
    return typeof version === 'string' ? version : 'unknown'
  } catch {
    return 'unknown'
  }
}

const quoted = (items: string[]) => items.map((i) => `"${i}"`).join(', ')

/** What `network` a run may ask, in words, and which it gets unset (`fallback`). */
function networkText(network: RunBounds['network'], fallback: unknown): string {
  const unset = `unset: ${typeof fallback === 'string' ? `"${fallback}"` : JSON.stringify(fallback)}`
  if (network === 'none') return 'The sandbox has no network.'
  if (network === 'host')
    return `Network: "none", "host" (any host) or an allowlist ("allow:example.com" or { allow: ["example.com"] }); ${unset}.`
  if (Array.isArray(network)) {
    const modes = network.map((m) =>
      m === 'allow' ? 'an allowlist of public hosts ("allow:example.com" or { allow: [...] })' : `"${m}"`,
    )
    return `Network: ${modes.join(', ')}; ${unset}.`
  }
  const example = network.allow.find((h) => !h.startsWith('*.')) ?? 'example.com'
  const reach = (['allowLoopback', 'allowPrivate', 'allowMetadata'] as const).filter((f) => network[f])
  return (
    `Network: "none", or an allowlist within these hosts only: ${network.allow.join(', ') || '(none)'}` +
    (network.deny.length > 0 ? ` (never: ${network.deny.join(', ')})` : '') +
    (reach.length > 0 ? ` (may set ${reach.join(', ')})` : '') +
    `, as "allow:${example}" or { allow: ["${example}"] }; ${unset}.`
  )
}

/**
 * The run tool's words on what this server allows: each limit's default and ceiling, the network, and
 * what persists. `fixed`: the operator's options every run gets (`cordon mcp`'s flags); `persistent`: host
 * paths the runs may write, which outlive a call.
 */
export function boundsText(bounds: RunBounds, fixed: Record<string, unknown>, persistent: string[]): string {
  const limits = Object.entries(bounds.limits).map(([name, { default: value, ceiling }]) => {
    const at = `${name}: default ${formatLimit(name, value)}`
    return ceiling === null ? at : `${at}, at most ${formatLimit(name, ceiling)}`
  })
  const fixedNames = Object.keys(fixed).filter((f) => f !== 'network')
  return [
    `This server's limits (\`limits\` may ask up to a limit's "at most", where it has one; a limit left unset gets its default): ${limits.join('; ')}.`,
    networkText(bounds.network, fixed.network ?? 'none'),
    fixedNames.length > 0 ? `The operator sets ${quoted(fixedNames)} for every run.` : '',
    persistent.length > 0
      ? `Each call is a fresh sandbox: nothing persists between calls but what a run writes under ${persistent.join(', ')}.`
      : 'Each call is a fresh sandbox: nothing persists between calls (files, installed packages, processes); give a run its files with `files`.',
  ]
    .filter(Boolean)
    .join(' ')
}
