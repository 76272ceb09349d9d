#!/usr/bin/env bash
# Installs what cordon needs on a Debian machine, and what its tests use: bubblewrap, util-linux and a C
# compiler from Debian (when root and missing), then the npm packages from the lockfile, whose scripts build
# it (TypeScript and the native helpers) once.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v prlimit >/dev/null || missing+=(util-linux)   # prlimit: the bench's hand-built baseline
# A C compiler and static libc build cordon's launcher (native/launch.c), which both tiers start through.
command -v cc >/dev/null || missing+=(gcc)
dpkg-query -W -f='${Status}' libc6-dev 2>/dev/null | grep -q 'ok installed' || missing+=(libc6-dev)
command -v musl-gcc >/dev/null || missing+=(musl-tools)   # a launcher on musl starts ~0.2 ms faster than on glibc
command -v python3 >/dev/null || missing+=(python3)
command -v curl >/dev/null || missing+=(curl)       # used by the network tests
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)  # cordon rootfs create
# libfaketime gives sandboxes a deterministic clock (the `clock` option).
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing+=(faketime)
command -v chromium >/dev/null || missing+=(chromium)   # the dashboard's browser tests (playwright-core drives it)
# For the tests of the seccomp filter and arm64: libseccomp's scmp_sys_resolver checks the system call
# tables; on x86_64, the arm64 cross compiler (and its kernel headers) builds the native helpers for arm64.
command -v scmp_sys_resolver >/dev/null || missing+=(seccomp)
# The scale-out tests start private servers from Debian's packages (test/helpers/servers.ts): PostgreSQL,
# the store of API nodes and workers on many machines, and Redis, its queue.
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
if [ "$(uname -m)" = x86_64 ]; then
  command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
  dpkg-query -W -f='${Status}' libc6-dev-arm64-cross 2>/dev/null | grep -q 'ok installed' || missing+=(libc6-dev-arm64-cross)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  else
    echo "cordon: please install: ${missing[*]} (sudo apt-get install -y ${missing[*]})" >&2
  fi
fi
# npm ci builds everything once: its install script the native helpers, its prepare script the TypeScript.
npm ci --no-audit --no-fund
