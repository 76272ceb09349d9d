#!/bin/sh
# Builds cordon's native helpers. The programs are always static: cordon-launch (launch.c), which every
# sandbox starts through, cordon-spawner (spawner.c), which starts them for a host that opened a
# Spawner, cordon-bridge (bridge.c), which a sandbox with a network allowlist runs first, on any root
# filesystem, so it cannot depend on the tree's libc, and cordon-await (await.c), a warm member's last
# step before its program, on any root filesystem too (the function runner's addon, built last, is the
# exception). One exec
# with no dynamic loader is the point, and the launcher starts as root with the sandbox's environment.
# musl first: its static start-up touches about half the pages glibc's does, and every sandbox pays that
# exec. Without a C compiler or a static C library no sandbox runs, and `cordon doctor` says how to fix it.
set -eu
cd "$(dirname "$0")"
cc=${CC:-cc}
# build NAME SOURCE WITHOUT: true when NAME was built; WITHOUT says what is lost when it is not.
build() {
  if [ ! -f "$2" ]; then
    echo "cordon: native/$2 is missing (an incomplete checkout or package): $1 is not built, so $3" >&2
    return 1
  fi
  flags="-O2 -s -Wall -Wextra -Werror -o $1.tmp $2"
  if command -v musl-gcc >/dev/null 2>&1; then
    # musl ships no kernel headers; the system's (linux-libc-dev) come after its own.
    multiarch=$("$cc" -print-multiarch 2>/dev/null || true)
    # shellcheck disable=SC2086
    if musl-gcc -static $flags -idirafter /usr/include ${multiarch:+-idirafter /usr/include/$multiarch} 2>/dev/null; then
      mv "$1.tmp" "$1"
      return 0
    fi
    echo "cordon: musl-gcc could not build $1, so it is built on glibc; every sandbox then starts ~0.2 ms slower" >&2
  else
    echo "cordon: musl-gcc is missing, so $1 is built on glibc; every sandbox then starts ~0.2 ms slower (apt-get install -y musl-tools, then npm run build)" >&2
  fi
  if ! command -v "$cc" >/dev/null 2>&1; then
    echo "cordon: no C compiler ($cc): $1 is not built, so $3 (apt-get install -y gcc libc6-dev, then npm run build)" >&2
    return 1
  fi
  # Static or nothing: a dynamically linked launcher would start as root with the sandbox's environment,
  # and its loader would run whatever LD_PRELOAD the policy sets.
  # shellcheck disable=SC2086
  if ! "$cc" -static $flags; then
    echo "cordon: no static C library: $1 is not built, so $3 (apt-get install -y libc6-dev or musl-tools, then npm run build)" >&2
    return 1
  fi
  mv "$1.tmp" "$1"
}
build cordon-launch launch.c "no sandbox runs" && build cordon-spawner spawner.c "openSpawner() is unavailable" &&
  build cordon-bridge bridge.c "a network allowlist is refused" &&
  build cordon-await await.c "a sandbox's warm members are unavailable (its runs start cold)"
# cordon-guard.node (guard.c) is the exception to "static or nothing": the function runner loads it into
# node itself (process.dlopen), so it must be a shared object on node's own C library, the system's
# compiler's. It runs in the sandbox's own runner, never as root nor before an exec, so no loader runs
# with the sandbox's environment on its account.
if command -v "$cc" >/dev/null 2>&1 && "$cc" -O2 -s -Wall -Wextra -Werror -shared -fPIC -o cordon-guard.node.tmp guard.c; then
  mv cordon-guard.node.tmp cordon-guard.node
else
  echo "cordon: cordon-guard.node is not built, so callFunction() refuses to call functions (apt-get install -y gcc libc6-dev, then npm run build)" >&2
fi
# Whatever the umask: the launcher is also the namespace tier's exec step, run as the sandbox's uid.
chmod 755 cordon-launch cordon-spawner cordon-await 2>/dev/null || true
exit 0
