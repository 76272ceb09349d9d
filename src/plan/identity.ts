// Who the sandbox is: the /etc/passwd and /etc/group it sees in place of the host's. Programs look their
// uid up there (whoami, id, Python's getpass, Node's os.userInfo(), ssh, git): without an entry they fail.
// The host's list of users is information a sandbox has no need of, so it gets a minimal pair: root, its
// own user `sandbox` with the run's uid and gid and its HOME, and nobody (what unmapped ids show as in a
// user namespace). Pure: plan.ts decides where they go, this spells what.

export const SANDBOX_USER = 'sandbox'
/** The files replaced, in the order the launcher and bwrap get them. */
export const IDENTITY_PATHS = ['/etc/passwd', '/etc/group'] as const
export type IdentityPath = (typeof IDENTITY_PATHS)[number]

const NOBODY = 65534

/**
 * The content of each file for a sandbox of `uid`/`gid` whose HOME is `home`. A HOME the passwd format
 * cannot hold (relative, or with ':' or a newline) becomes '/'. nobody and nogroup are left out when the
 * sandbox's own ids are theirs (an unprivileged host user nobody), so each id has one name.
 */
export function identityFiles(uid: number, gid: number, home: string): Record<IdentityPath, string> {
  const dir = home.startsWith('/') && !/[:\n]/.test(home) ? home : '/'
  const passwd = [
    'root:x:0:0:root:/root:/bin/sh',
    `${SANDBOX_USER}:x:${uid}:${gid}:cordon sandbox:${dir}:/bin/sh`,
    ...(uid === NOBODY ? [] : [`nobody:x:${NOBODY}:${NOBODY}:nobody:/nonexistent:/usr/sbin/nologin`]),
  ]
  const group = [
    ...(gid === 0 ? [] : ['root:x:0:']),
    `${SANDBOX_USER}:x:${gid}:`,
    ...(gid === NOBODY ? [] : [`nogroup:x:${NOBODY}:`]),
  ]
  return { '/etc/passwd': `${passwd.join('\n')}\n`, '/etc/group': `${group.join('\n')}\n` }
}
