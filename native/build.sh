#!/bin/sh
# Builds cordon's launcher (native/cordon-launch) from native/launch.c. Static when the C library
# allows it: one exec with no dynamic loader is the point of the launcher. Without a C compiler the process
# tier is unavailable and `cordon doctor` says how to fix it; the namespace tier does not need the launcher.
set -eu
cd "$(dirname "$0")"
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "cordon: no C compiler ($cc): cordon's launcher is not built, so no sandbox runs (apt-get install -y gcc libc6-dev, then npm run build)" >&2
  exit 0
fi
flags="-O2 -s -Wall -Wextra -Werror -o cordon-launch.tmp launch.c"
# shellcheck disable=SC2086
"$cc" -static $flags 2>/dev/null || "$cc" $flags
mv cordon-launch.tmp cordon-launch
