// What this machine can enforce. `probeCapabilities` reads it afresh (stat and sysctl reads, ~0.3 ms);
// runs use `recentCapabilities`, at most a second old; `cordon doctor` adds a real bwrap launch on top.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { monotonicMs } from '../lazy.js'
import { type CgroupSupport, cgroupSupport, detectCgroups } from './cgroups.js'
import { BRIDGE_PATH, LAUNCHER_PATH, landlockAbi } from './native.js'
import { isExecutableFile, resolveProgram, SAFE_PATH } from './programs.js'
import { type SeccompArch, seccompArchOf } from './syscalls.js'

export interface Capabilities {
  isRoot: boolean
  /** Real paths of the helpers cordon launches through; null when missing. */
  bwrap: string | null
  /** cordon's own launcher (native/cordon-launch), which both tiers start through; null when not built. */
  launcher: string | null
  /** The kernel's Landlock ABI version (0: none): the process tier's filesystem and scope limits. */
  landlock: number
  /** coreutils env: sets the clock's variables for the program alone. */
  env: string | null
  /** cordon's network bridge (native/cordon-bridge) for network allowlists; null when not built. */
  bridge: string | null
  /** Unprivileged user namespaces are allowed by the kernel's sysctls. */
  userns: boolean
  /** Why user namespaces are unavailable, when they are. */
  usernsReason: string | null
  /** Where per-sandbox cgroups can be made, or why not. */
  cgroup: CgroupSupport
  /** libfaketime, which gives a sandbox its own wall clock; null when not installed. */
  faketime: string | null
  /** The architecture whose seccomp filter every sandbox gets; null: cordon has none for this one. */
  seccompArch: SeccompArch | null
}

function readSysctl(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim()
  } catch {
    return null
  }
}

/** Debian's libfaketime lives in the multiarch library directory. */
function findFaketime(): string | null {
  const dirs = ['/usr/lib', '/usr/lib64', '/usr/local/lib']
  for (const dir of dirs) {
    let entries: string[] = []
    try {
      entries = readdirSync(dir)
    } catch {
      continue
    }
    for (const sub of ['', ...entries.filter((e) => e.endsWith('-linux-gnu'))]) {
      const lib = path.join(dir, sub, 'faketime', 'libfaketime.so.1')
      if (existsSync(lib)) return lib
    }
  }
  return null
}

function usernsBlocker(): string | null {
  if (readSysctl('/proc/sys/user/max_user_namespaces') === '0') return 'user.max_user_namespaces is 0'
  if (readSysctl('/proc/sys/kernel/unprivileged_userns_clone') === '0') {
    return 'kernel.unprivileged_userns_clone is 0'
  }
  if (readSysctl('/proc/sys/kernel/apparmor_restrict_unprivileged_userns') === '1') {
    return 'kernel.apparmor_restrict_unprivileged_userns is 1'
  }
  return null
}

/**
 * Define `fields` as getters that compute once, on first read: every run probes, but most runs never
 * ask about the tools only some policies need (the bridge, env, libfaketime, the launcher and Landlock).
 */
function lazily<T extends object>(target: T, fields: { [K in keyof T]?: () => T[K] }): T {
  for (const [key, compute] of Object.entries(fields) as [string, () => unknown][]) {
    Object.defineProperty(target, key, {
      enumerable: true,
      configurable: true,
      get() {
        const value = compute()
        Object.defineProperty(target, key, { value, enumerable: true })
        return value
      },
    })
  }
  return target
}

export function probeCapabilities(cgroupParent?: string, hostPath = process.env.PATH ?? ''): Capabilities {
  const searchPath = `${SAFE_PATH}:${hostPath}`
  const find = (name: string) => resolveProgram(name, searchPath, '/')
  const usernsReason = usernsBlocker()
  const eager = {
    isRoot: process.getuid?.() === 0,
    bwrap: find('bwrap'),
    userns: usernsReason === null,
    usernsReason,
    cgroup: cgroupSupport(detectCgroups(), cgroupParent),
    seccompArch: seccompArchOf(),
  }
  const caps: Capabilities = lazily(eager as Capabilities, {
    launcher: () => (isExecutableFile(LAUNCHER_PATH) ? LAUNCHER_PATH : null),
    landlock: () => (caps.launcher ? landlockAbi(caps.launcher) : 0),
    bridge: () => (isExecutableFile(BRIDGE_PATH) ? BRIDGE_PATH : null),
    env: () => find('env'),
    faketime: findFaketime,
  })
  return caps
}

/** How long a probe is reused by runs: tools installed or a cgroup delegated show up within this. */
const PROBE_TTL_MS = 1000
const recent = new Map<string, { at: number; caps: Capabilities }>()

/** `probeCapabilities`, reused for up to PROBE_TTL_MS: machine facts, not per-run state. */
export function recentCapabilities(cgroupParent?: string, hostPath = process.env.PATH ?? ''): Capabilities {
  const key = `${cgroupParent ?? ''}\0${hostPath}`
  const now = monotonicMs()
  const hit = recent.get(key)
  if (hit && now - hit.at < PROBE_TTL_MS) return hit.caps
  const caps = probeCapabilities(cgroupParent, hostPath)
  recent.set(key, { at: now, caps })
  return caps
}
