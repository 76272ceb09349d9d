// callFunction as the public API gives it: the caller's side of a call (and node:v8 with it, ~4 ms) is
// loaded at the first call, so that importing cordon (the CLI's every start) does not pay for it.
import type * as Call from './call.js'

export type { FunctionResult } from './call.js'

export const callFunction = (async (...args: Parameters<typeof Call.callFunction>) => {
  const { callFunction: call } = await import('./call.js')
  return call(...args)
}) as typeof Call.callFunction
