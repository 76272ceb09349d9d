#!/usr/bin/env bash
# The service end to end, as the README's first command shows it: `cordon serve` on a fresh data dir (its
# embedded SQLite store), one run submitted over HTTP with the admin key it prints on first start, the
# result read back, then SIGTERM: the server drains and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
data=$(mktemp -d)
out=$(mktemp)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$data" "$out"' EXIT
node dist/cli/bin.cjs serve --port 0 --data-dir "$data" >"$out" 2>/dev/null &
server=$!
for _ in $(seq 100); do grep -q 'admin key' "$out" && break; sleep 0.1; done
url=$(sed -n 's/^cordon: listening on \(http[^ ]*\).*/\1/p' "$out")
key=$(sed -n 's/^cordon: admin key: \([^ ]*\).*/\1/p' "$out")
[ -n "$url" ] && [ -n "$key" ] || { echo "serve-demo: cordon serve did not start" >&2; cat "$out" >&2; exit 1; }
echo "cordon serve at $url, data in $data"
curl -sS --fail-with-body -H "Authorization: Bearer $key" -H 'content-type: application/json' \
  -d '{"cmd":["sh","-c","echo hello from a served sandbox"],"wait":"10s"}' "$url/v1/runs"
echo
kill -TERM "$server"
wait "$server"
echo "cordon serve drained and exited 0"
