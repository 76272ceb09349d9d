// docs/options.md is generated from the policy schema (scripts/docs.mjs); this fails when the two drift,
// so a new or changed option cannot reach a release with stale docs.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import * as z from 'zod'
import { OPTIONS_MD, renderOptions } from '../../scripts/docs.mjs'
import { policySchema } from '../../src/index.js'
import { cli } from '../../src/policy/schema.js'

test('docs/options.md matches the schema', () => {
  const expected = renderOptions({ policySchema, cli })
  const actual = readFileSync(OPTIONS_MD, 'utf8')
  if (actual !== expected) {
    const a = actual.split('\n')
    const e = expected.split('\n')
    const line = e.findIndex((l, i) => l !== a[i])
    assert.fail(
      `docs/options.md is out of date with the schema (first difference at line ${line + 1}: ` +
        `${JSON.stringify(a[line])} should be ${JSON.stringify(e[line])}): run npm run docs`,
    )
  }
})

test('every option of the schema is in docs/options.md', () => {
  const text = readFileSync(OPTIONS_MD, 'utf8')
  for (const key of Object.keys(policySchema.shape)) {
    assert.match(text, new RegExp(`\\| \`${key}(\\.\\w+)?\` \\|`), `${key} is not documented`)
  }
})

test('a field without a description stops the generator, naming it', () => {
  const registry = z.registry<{ flag: string; description: string }>()
  const schema = z.strictObject({
    described: z.string().describe('has one'),
    flagged: z.string().register(registry, { flag: 'flagged', description: 'from its flag' }),
    nested: z.strictObject({ bare: z.number() }).optional(),
  })
  assert.throws(() => renderOptions({ policySchema: schema, cli: registry }), /no description.*nested\.bare/)
})
