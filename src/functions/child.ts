// Runs inside the sandbox: reads one call request from fd 7, runs the export, writes one reply to fd 8.
// Nothing the function prints reaches fd 8, and a frame it might write there lacks the caller's nonce.
import { closeSync, readFileSync, writeSync } from 'node:fs'
import { constants } from 'node:os'
import { fileURLToPath } from 'node:url'
import { deserialize } from 'node:v8'
import { type CallReply, type CallRequest, errorInfo, frame, GUARD_FROM_RUNNER } from './protocol.js'

const REQUEST_FD = 7
const REPLY_FD = 8

// First of all, before the nonce is read and before any of the function's code runs: the guard makes this
// process non-dumpable, fds 7 and 8 close-on-exec and SIGUSR1 harmless, so nothing the function starts can
// read the nonce from this process, write to its reply channel or open its inspector (native/guard.c).
const guard = fileURLToPath(new URL(GUARD_FROM_RUNNER, import.meta.url))
let unguarded: string | null = null
try {
  process.dlopen({ exports: {} }, guard, constants.dlopen.RTLD_NOW)
} catch (error) {
  unguarded = `its runner could not load ${guard} (built by npm run build, which needs a C compiler): ${errorInfo(error).message}`
}
// An inspector already open is a door into this process for every process of the sandbox. Only a flag
// opens one before this line (--inspect*, in NODE_OPTIONS: the runner has no other); node:inspector costs
// milliseconds to load, so it is asked only then. A node built without one has none to open.
if (
  unguarded === null &&
  /inspect/i.test(`${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`)
) {
  const url = (await import('node:inspector').catch(() => null))?.url()
  if (url)
    unguarded = `its runner has an open inspector (${url}), through which anything in the sandbox could run code in it`
}

const request = deserialize(readFileSync(REQUEST_FD)) as CallRequest
closeSync(REQUEST_FD)
const { nonce } = request

function reply(message: CallReply, code: number): never {
  writeSync(REPLY_FD, frame(message))
  closeSync(REPLY_FD)
  process.exit(code)
}

if (unguarded !== null) {
  // Never unguarded: the function is not called at all.
  reply(
    { nonce, kind: 'guard', error: { name: 'Error', message: `the function was not called: ${unguarded}` } },
    2,
  )
}
let mod: Record<string, unknown>
try {
  mod = (await import(request.module)) as Record<string, unknown>
} catch (error) {
  reply({ nonce, kind: 'load-error', error: errorInfo(error) }, 2)
}
const fn = mod[request.exportName]
if (typeof fn !== 'function') {
  const message = `${request.module} has no exported function "${request.exportName}"`
  reply({ nonce, kind: 'no-export', error: { name: 'TypeError', message } }, 2)
}
let value: unknown
try {
  value = await (fn as (...args: unknown[]) => unknown)(...request.args)
} catch (error) {
  reply({ nonce, kind: 'threw', error: errorInfo(error) }, 1)
}
let encoded: Buffer
try {
  encoded = frame({ nonce, kind: 'value', value })
} catch (error) {
  const info = errorInfo(error)
  reply(
    {
      nonce,
      kind: 'not-cloneable',
      error: {
        ...info,
        message: `the return value of "${request.exportName}" cannot be cloned: ${info.message}`,
      },
    },
    2,
  )
}
writeSync(REPLY_FD, encoded)
closeSync(REPLY_FD)
process.exit(0)
