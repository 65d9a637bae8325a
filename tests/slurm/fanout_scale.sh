#!/usr/bin/env bash
# fanout_scale.sh: time and memory of a fleet arm and a fleet listing against
# node count, over real kerncapd instances on loopback addresses 127.0.0.2...
# each with its own TLS listener and token (docs/CLUSTER.md, "Scale").
#
#   fanout_scale.sh [BUILD_DIR] [COUNTS] [FANOUT]   defaults: ./build, "8 16 32 64", 16
#
# Prints one table row per node count: wall seconds of `kerncapctl arm
# --endpoints` and `kerncapctl captures --endpoints` (each node with one
# synthetic agent and, for the listing, 4 captures), the fan-out process's
# peak RSS, and the peak RSS of one per-node child. Exits 1 when any node of
# a run did not answer.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
BUILD="$(cd "${1:-${KERNCAP_BUILD_DIR:-$REPO/build}}" && pwd)"
COUNTS="${2:-8 16 32 64}"
FANOUT="${3:-16}"
BIN="$BUILD/bin"
MAX=0
for n in $COUNTS; do [ "$n" -gt "$MAX" ] && MAX=$n; done
[ "$MAX" -le 250 ] || { echo "at most 250 nodes (127.0.0.2-251)"; exit 2; }

DIR="$(mktemp -d /tmp/kerncap-fanout.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT

# One CA-less self-signed certificate valid for every loopback address used.
san="IP:127.0.0.1"
for i in $(seq 1 "$MAX"); do san="$san,IP:127.0.0.$((i + 1))"; done
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=kerncap-fanout-test" \
  -addext "subjectAltName=$san" -keyout "$DIR/key.pem" -out "$DIR/cert.pem" 2>/dev/null ||
  { echo "openssl failed"; exit 1; }
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/token"
chmod 0600 "$DIR/token" "$DIR/key.pem"
PORT=$((20000 + RANDOM % 20000))

echo "starting $MAX kerncapd (127.0.0.2-127.0.0.$((MAX + 1)):$PORT, TLS + token), one agent each"
for i in $(seq 1 "$MAX"); do
  d="$DIR/n$i"
  mkdir -p "$d"
  "$BIN/kerncapd" --store="$d/store" --socket="$d/kerncapd.sock" --agent-socket="$d/agent.sock" \
    --listen="127.0.0.$((i + 1)):$PORT" --tls-cert="$DIR/cert.pem" --tls-key="$DIR/key.pem" \
    --token-file="$DIR/token" --workers=1 --log-level=warn >"$d/log" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 "$MAX"); do
  for _ in $(seq 1 100); do [ -S "$DIR/n$i/agent.sock" ] && break; sleep 0.1; done
  "$BIN/synthetic_agent" --socket="$DIR/n$i/agent.sock" --kernels=k --dispatches=100000000 \
    --dispatch-interval-ms=50 --region-mib=0.0625 >"$DIR/n$i/agent.out" 2>&1 &
  pids+=($!)
done
sleep 1

CTL=("$BIN/kerncapctl" --json --tls-ca="$DIR/cert.pem" --token-file="$DIR/token")
# 4 captures per node, armed and taken before the measured listings.
for i in $(seq 1 "$MAX"); do echo "n$i 127.0.0.$((i + 1)):$PORT"; done >"$DIR/all"
"${CTL[@]}" arm --endpoints="$DIR/all" --kernel=k --count=4 --fanout=32 >/dev/null ||
  { echo "priming arm failed"; exit 1; }
"${CTL[@]}" wait --endpoints="$DIR/all" --wait-captures=$((MAX * 4)) --wait-timeout=120 \
  --fanout=32 >/dev/null || { echo "priming captures did not all arrive"; exit 1; }

# One node's child, alone: its peak RSS (KiB).
child_kib="$(/usr/bin/time -f '%M' "${CTL[@]}" --host="127.0.0.2:$PORT" captures 2>&1 >/dev/null | tail -1)"

bad=0
measure() {  # OP N -> "seconds rss_kib"
  local op="$1" n="$2" out
  head -n "$n" "$DIR/all" >"$DIR/nodes.$n"
  local args=(arm --kernel=never_matches --count=1 --ttl=1m)
  [ "$op" = list ] && args=(captures)
  out="$( { /usr/bin/time -f 'TIME %e %M' "${CTL[@]}" "${args[@]}" --endpoints="$DIR/nodes.$n" \
    --fanout="$FANOUT" >"$DIR/out.$op.$n"; } 2>&1 | grep '^TIME')"
  if ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["nodes_answered"]==int(sys.argv[2]) else 1)' \
      "$DIR/out.$op.$n" "$n"; then
    bad=1
  fi
  echo "${out#TIME }"
}

printf '\n%-6s %-7s %-10s %-12s %-10s %-12s %-12s\n' nodes fanout arm_s arm_rss_MiB list_s list_rss_MiB child_rss_MiB
for n in $COUNTS; do
  read -r a_s a_kib <<<"$(measure arm "$n")"
  read -r l_s l_kib <<<"$(measure list "$n")"
  printf '%-6s %-7s %-10s %-12s %-10s %-12s %-12s\n' "$n" "$FANOUT" "$a_s" \
    "$(awk "BEGIN{printf \"%.1f\", $a_kib/1024}")" "$l_s" \
    "$(awk "BEGIN{printf \"%.1f\", $l_kib/1024}")" "$(awk "BEGIN{printf \"%.1f\", $child_kib/1024}")"
done
echo
echo "rss columns: the fan-out process itself; each of up to $FANOUT children at once adds about child_rss"
[ "$bad" -eq 0 ] || { echo "FAIL: some nodes did not answer"; exit 1; }
