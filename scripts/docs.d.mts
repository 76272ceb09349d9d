// Types for scripts/docs.mjs, which test/docs/options.test.ts imports.
import type * as z from 'zod'

export function renderOptions(schemas: {
  policySchema: z.ZodObject
  cli: z.core.$ZodRegistry<{ flag: string; arg?: string; description: string }>
}): string
export const OPTIONS_MD: string
