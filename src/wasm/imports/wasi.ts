// `wasi_snapshot_preview1`, the part a guest built by a common toolchain (Rust's wasm32-wasip1, wasi-libc,
// TinyGo) needs to start and print: args, environment, clocks, randomness, fd_write to stdout and stderr,
// stdin at EOF, proc_exit. No filesystem: no preopens (fd_prestat_get answers EBADF, which is how
// wasi-libc learns there are none), and every other import is a stub answering ENOSYS. node:wasi is not
// used: its own docs say it is no boundary for untrusted code.
import {
  type GuestEnv,
  type HostContext,
  type HostHandler,
  inBounds,
  int,
  MAX_CALL_BYTES,
  type Signature,
  sig,
} from '../abi.js'

export const MODULE = 'wasi_snapshot_preview1'

export const ERRNO = { success: 0, badf: 8, fault: 21, inval: 28, nosys: 52, spipe: 70 } as const

export const SIGNATURES: Readonly<Record<string, Signature>> = {
  args_get: sig('i32,i32', 'i32'),
  args_sizes_get: sig('i32,i32', 'i32'),
  environ_get: sig('i32,i32', 'i32'),
  environ_sizes_get: sig('i32,i32', 'i32'),
  clock_res_get: sig('i32,i32', 'i32'),
  clock_time_get: sig('i32,i64,i32', 'i32'),
  random_get: sig('i32,i32', 'i32'),
  fd_write: sig('i32,i32,i32,i32', 'i32'),
  fd_read: sig('i32,i32,i32,i32', 'i32'),
  fd_fdstat_get: sig('i32,i32', 'i32'),
  fd_prestat_get: sig('i32,i32', 'i32'),
  fd_prestat_dir_name: sig('i32,i32,i32', 'i32'),
  fd_close: sig('i32', 'i32'),
  fd_seek: sig('i32,i64,i32,i32', 'i32'),
  proc_exit: sig('i32'),
  sched_yield: sig('', 'i32'),
}

/** Most iovecs one fd_write takes (Linux's IOV_MAX). */
const MAX_IOVS = 1024
/** WASI rights: fd_read, fd_write. Neither seek nor tell, so wasi-libc's isatty() says yes: lines flush. */
const RIGHT_READ = 1n << 1n
const RIGHT_WRITE = 1n << 6n
const CHARACTER_DEVICE = 2

type GuestFn = (...args: (number | bigint)[]) => number | bigint | undefined

/**
 * The guest's side. `stubs` are the module's other imports from this set, each answering ENOSYS (or
 * nothing, for one without a result). Pointers are unsigned here, as WASI's are.
 */
export function guestImports(env: GuestEnv, stubs: readonly string[] = []): Record<string, GuestFn> {
  const call = (field: string, values: (number | bigint)[] = [], bytes?: Uint8Array) =>
    env.call({ name: `${MODULE}.${field}`, values, ...(bytes ? { bytes } : {}) })
  const u32 = (v: number | bigint | undefined) => Number(v) >>> 0
  /** Writes little-endian words at `ptr` when they all fit; false when they do not. */
  const put = (ptr: number, words: (number | bigint)[], width: 4 | 8): boolean => {
    const memory = env.memory()
    if (!inBounds(memory, ptr, words.length * width)) return false
    const view = new DataView(memory.buffer, memory.byteOffset, memory.byteLength)
    words.forEach((w, i) => {
      if (width === 4) view.setUint32(ptr + 4 * i, Number(w) >>> 0, true)
      else view.setBigUint64(ptr + 8 * i, BigInt(w), true)
    })
    return true
  }
  /** The strings' count and bytes (NUL-terminated, joined), laid out as argv/environ. */
  const strings = (what: 'args' | 'environ') => ({
    sizes(countPtr: number | bigint | undefined, sizePtr: number | bigint | undefined) {
      const [count, size] = call(`${what}_sizes_get`).values
      return put(u32(countPtr), [count ?? 0], 4) && put(u32(sizePtr), [size ?? 0], 4)
        ? ERRNO.success
        : ERRNO.fault
    },
    get(listPtr: number | bigint | undefined, bufPtr: number | bigint | undefined) {
      const reply = call(`${what}_get`)
      const buf = reply.bytes ?? new Uint8Array(0)
      const starts: number[] = []
      for (let i = 0, start = 0; i < buf.length; i++) {
        if (buf[i] !== 0) continue
        starts.push(u32(bufPtr) + start)
        start = i + 1
      }
      const memory = env.memory()
      if (!inBounds(memory, u32(bufPtr), buf.length) || !put(u32(listPtr), starts, 4)) return ERRNO.fault
      memory.set(buf, u32(bufPtr))
      return ERRNO.success
    },
  })
  const args = strings('args')
  const environ = strings('environ')
  const fns: Record<string, GuestFn> = {
    args_sizes_get: args.sizes,
    args_get: args.get,
    environ_sizes_get: environ.sizes,
    environ_get: environ.get,
    clock_time_get(id, _precision, ptr) {
      const [errno, ns] = call('clock_time_get', [Number(id)]).values
      if (errno !== ERRNO.success) return Number(errno)
      return put(u32(ptr), [ns ?? 0n], 8) ? ERRNO.success : ERRNO.fault
    },
    clock_res_get(id, ptr) {
      const [errno, ns] = call('clock_res_get', [Number(id)]).values
      if (errno !== ERRNO.success) return Number(errno)
      return put(u32(ptr), [ns ?? 0n], 8) ? ERRNO.success : ERRNO.fault
    },
    random_get(buf, len) {
      const at = u32(buf)
      const n = u32(len)
      if (!inBounds(env.memory(), at, n)) {
        call('random_get', [0])
        return ERRNO.fault
      }
      for (let done = 0; done < n || n === 0; ) {
        const part = Math.min(n - done, MAX_CALL_BYTES)
        const bytes = call('random_get', [part]).bytes ?? new Uint8Array(0)
        const memory = env.memory()
        if (bytes.length !== part || !inBounds(memory, at + done, part)) return ERRNO.fault
        memory.set(bytes, at + done)
        done += part
        if (n === 0) break
      }
      return ERRNO.success
    },
    fd_write(fd, iovs, iovsLen, nwrittenPtr) {
      const memory = env.memory()
      const count = u32(iovsLen)
      if (count > MAX_IOVS) {
        call('fd_write', [Number(fd)])
        return ERRNO.inval
      }
      if (!inBounds(memory, u32(iovs), count * 8)) {
        call('fd_write', [Number(fd)])
        return ERRNO.fault
      }
      const view = new DataView(memory.buffer, memory.byteOffset, memory.byteLength)
      const parts: Uint8Array[] = []
      let total = 0
      for (let i = 0; i < count && total < MAX_CALL_BYTES; i++) {
        const ptr = view.getUint32(u32(iovs) + 8 * i, true)
        const len = view.getUint32(u32(iovs) + 8 * i + 4, true)
        if (!inBounds(memory, ptr, len)) {
          call('fd_write', [Number(fd)])
          return ERRNO.fault
        }
        // A write may be partial: past one call's bytes, the rest is left for the guest's next write.
        const take = Math.min(len, MAX_CALL_BYTES - total)
        parts.push(memory.subarray(ptr, ptr + take))
        total += take
      }
      const bytes = new Uint8Array(total)
      let at = 0
      for (const p of parts) {
        bytes.set(p, at)
        at += p.length
      }
      const errno = int(call('fd_write', [Number(fd)], bytes).values, 0)
      if (errno !== ERRNO.success) return errno
      return put(u32(nwrittenPtr), [total], 4) ? ERRNO.success : ERRNO.fault
    },
    fd_read(fd, _iovs, _iovsLen, nreadPtr) {
      call('fd_read', [Number(fd)])
      // stdin is at its end; no other fd exists.
      if (Number(fd) !== 0) return ERRNO.badf
      return put(u32(nreadPtr), [0], 4) ? ERRNO.success : ERRNO.fault
    },
    fd_fdstat_get(fd, ptr) {
      call('fd_fdstat_get', [Number(fd)])
      const n = Number(fd)
      if (n < 0 || n > 2) return ERRNO.badf
      const memory = env.memory()
      if (!inBounds(memory, u32(ptr), 24)) return ERRNO.fault
      const view = new DataView(memory.buffer, memory.byteOffset, memory.byteLength)
      const at = u32(ptr)
      memory.fill(0, at, at + 24)
      view.setUint8(at, CHARACTER_DEVICE)
      view.setBigUint64(at + 8, n === 0 ? RIGHT_READ : RIGHT_WRITE, true)
      return ERRNO.success
    },
    fd_prestat_get(fd) {
      call('fd_prestat_get', [Number(fd)])
      return ERRNO.badf
    },
    fd_prestat_dir_name(fd) {
      call('fd_prestat_dir_name', [Number(fd)])
      return ERRNO.badf
    },
    fd_close(fd) {
      call('fd_close', [Number(fd)])
      return Number(fd) >= 0 && Number(fd) <= 2 ? ERRNO.success : ERRNO.badf
    },
    fd_seek(fd) {
      call('fd_seek', [Number(fd)])
      return Number(fd) >= 0 && Number(fd) <= 2 ? ERRNO.spipe : ERRNO.badf
    },
    proc_exit(code) {
      call('proc_exit', [Number(code)])
      return env.exit(Number(code))
    },
    sched_yield() {
      call('sched_yield')
      return ERRNO.success
    },
  }
  for (const name of stubs) {
    if (Object.hasOwn(fns, name)) continue
    fns[name] = () => {
      call(name)
      return ERRNO.nosys
    }
  }
  return fns
}

/** The host's side: the strings, the clock, randomness, and stdout/stderr; the rest is only counted. */
export function hostHandlers(ctx: HostContext, stubs: readonly string[] = []): Record<string, HostHandler> {
  const joined = (list: readonly string[]) => new Uint8Array(Buffer.from(list.map((s) => `${s}\0`).join('')))
  const args = joined(ctx.args)
  const environ = joined(ctx.environ)
  const counted: HostHandler = () => ({ values: [] })
  const handlers: Record<string, HostHandler> = {
    args_sizes_get: () => ({ values: [ctx.args.length, args.length] }),
    args_get: () => ({ values: [], bytes: args }),
    environ_sizes_get: () => ({ values: [ctx.environ.length, environ.length] }),
    environ_get: () => ({ values: [], bytes: environ }),
    clock_time_get(values) {
      const ns = ctx.clock.readNs(int(values, 0))
      return { values: ns === null ? [ERRNO.inval, 0n] : [ERRNO.success, ns] }
    },
    clock_res_get(values) {
      const ns = ctx.clock.resolutionNs(int(values, 0))
      return { values: ns === null ? [ERRNO.inval, 0n] : [ERRNO.success, ns] }
    },
    random_get(values) {
      const n = int(values, 0)
      if (n < 0 || n > MAX_CALL_BYTES) return { values: [ERRNO.inval] }
      return { values: [ERRNO.success], bytes: ctx.clock.random(n) }
    },
    fd_write(values, bytes) {
      const fd = int(values, 0)
      if (fd !== 1 && fd !== 2) return { values: [ERRNO.badf] }
      if (bytes) ctx.write(fd, bytes)
      return { values: [ERRNO.success] }
    },
  }
  for (const name of [...Object.keys(SIGNATURES), ...stubs]) handlers[name] ??= counted
  return Object.fromEntries(Object.entries(handlers).map(([k, v]) => [`${MODULE}.${k}`, v]))
}
