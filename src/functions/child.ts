// Runs inside the sandbox: reads one call request from fd 7, runs the export, writes one reply to fd 8.
// Nothing the function prints reaches fd 8, and a frame it might write there lacks the caller's nonce.
import { closeSync, readFileSync, writeSync } from 'node:fs'
import { deserialize } from 'node:v8'
import { type CallReply, type CallRequest, errorInfo, frame } from './protocol.js'

const REQUEST_FD = 7
const REPLY_FD = 8

const request = deserialize(readFileSync(REQUEST_FD)) as CallRequest
closeSync(REQUEST_FD)
const { nonce } = request

function reply(message: CallReply, code: number): never {
  writeSync(REPLY_FD, frame(message))
  closeSync(REPLY_FD)
  process.exit(code)
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
