// A network allowlist as its schema says it (policy/schema.ts composes it into the options): the one
// definition of what NetworkGate and the proxies are given.
import * as z from 'zod'
import { parseRule } from './rules.js'

const hostEntry = z.string().superRefine((entry, ctx) => {
  const rule = parseRule(entry)
  if (typeof rule === 'string') ctx.addIssue({ code: 'custom', message: rule })
})

export const networkAllowSchema = z.strictObject({
  allow: z
    .array(hostEntry)
    .default([])
    .describe(
      'hosts the sandbox may reach: `host` or `host:port` (`[v6]:port`); `*.x.com` matches subdomains only',
    ),
  deny: z.array(hostEntry).default([]).describe('hosts refused even when allowed (deny wins)'),
  allowLoopback: z
    .boolean()
    .default(false)
    .describe("let connections reach loopback addresses (the host's own)"),
  allowPrivate: z
    .boolean()
    .default(false)
    .describe('let connections reach private and other reserved ranges (10/8, 192.168/16, fc00::/7…)'),
  allowMetadata: z
    .boolean()
    .default(false)
    .describe(
      "let connections reach cloud metadata endpoints (link-local 169.254/16 and fe80::/10, fd00:ec2::254, 168.63.129.16, 100.100.100.200, 192.0.0.192), which hand out the host's cloud credentials; allowPrivate does not",
    ),
})

/** An allowlist, parsed: what the gate decides each connection by. */
export type NetworkPolicy = z.output<typeof networkAllowSchema>
