#!/usr/bin/env bash
# selftest.sh: checks run_p6.sh's own logic on a machine without a GPU, with
# stand-ins for every tool it runs (nvidia-smi, cmake, ninja, nvcc, kerncapd,
# kerncapctl, kerncap-replay, the application and the reproducer's Makefile;
# python3 binds the stand-in server's Unix socket). It does not measure
# anything: it checks that loop (b) goes through `make serve` / submit, that
# the server is stopped, that the recompile/validate breakdown and BENCH_JSON
# fields are there, and that a validate that did not reach the server is
# reported as such.
#
# Usage: tests/bench/p6/selftest.sh     exit 0: passed, 1: failed, 77: skipped
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
for tool in python3 make awk; do
  command -v "$tool" > /dev/null || { echo "selftest: no $tool: skipped"; exit 77; }
done
T=$(mktemp -d /tmp/kc-p6-selftest.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T"/bin "$T"/kbin
fails=0
check() {  # DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "  ok: $what"; else echo "  FAILED: $what"; fails=$((fails + 1)); fi
}
script() {  # PATH BODY
  printf '#!/bin/sh\n%s\n' "$2" > "$1"
  chmod +x "$1"
}

script "$T"/bin/nvidia-smi 'exit 0'
script "$T"/bin/cmake 'while [ $# -gt 0 ]; do case $1 in -B) b=$2; shift ;; -S) s=$2; shift ;; esac; shift; done
mkdir -p "$b" && echo "$s" > "$b/srcdir"'
script "$T"/bin/ninja 'b=$2
echo "[1/1] Building CUDA object src/attention/scores.cu.o"
printf "#!/bin/sh\nsleep 0.2\necho check passed\n" > "$b/kcsim" && chmod +x "$b/kcsim"
echo "[]" > "$b/compile_commands.json"'
# nvcc: -o OUT; -time FILE appends a CSV row as nvcc does.
script "$T"/bin/nvcc 'out=; tf=; prev=
for a in "$@"; do case $prev in -o) out=$a ;; -time) tf=$a ;; esac; prev=$a; done
sleep 0.15
echo cubin > "$out"
if [ -n "$tf" ]; then
  [ -f "$tf" ] || echo "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit" > "$tf"
  echo "src/a.cu , cicc , x.ii  , x.ptx , compute_90 , nvcc , 150.0 , ms" >> "$tf"
fi'
script "$T"/kbin/kerncapd 'for a in "$@"; do case $a in --socket=*) sock=${a#--socket=} ;; esac; done
exec python3 -c "
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
while True: time.sleep(1)
" "$sock"'
# The reproducer: scores.cu and a Makefile with the generated one's targets
# (validate submits while build/serve.sock exists).
cat > "$T"/Makefile.repro <<'EOF'
NVCC ?= nvcc
KERNCAP_REPLAY ?= kerncap-replay
SERVE_SOCKET ?= build/serve.sock
SERVING = $(shell test -S $(SERVE_SOCKET) && echo yes)
.PHONY: recompile validate serve serve-stop
recompile: build/kernel.cubin
build/kernel.cubin: src/scores.cu
	@mkdir -p build
	$(NVCC) -cubin -arch=sm_90 -O3 -o $@ src/scores.cu
validate:
	$(if $(SERVING),$(KERNCAP_REPLAY) submit --socket=$(SERVE_SOCKET) build/kernel.cubin --iterations=0,$(KERNCAP_REPLAY) validate capture.kcap --code-object=build/kernel.cubin)
serve:
	@mkdir -p build
	nohup $(KERNCAP_REPLAY) serve capture.kcap --socket=$(SERVE_SOCKET) </dev/null >build/serve.log 2>&1 & echo $$! > build/serve.pid; \
	for i in $$(seq 100); do test -S $(SERVE_SOCKET) && exit 0; sleep 0.1; done; exit 2
serve-stop:
	@kill $$(cat build/serve.pid) 2>/dev/null; for i in $$(seq 50); do test -S $(SERVE_SOCKET) || break; sleep 0.1; done; rm -f build/serve.pid
EOF
script "$T"/kbin/kerncapctl 'case "$*" in
*captures*) echo "{\"captures\": [{\"capture_id\": \"cap-0001\"}]}" ;;
*" repro "*)
  for a in "$@"; do case $a in --out=*) out=${a#--out=} ;; --source-dir=*) src=${a#--source-dir=} ;; esac; done
  mkdir -p "$out/src" && cp "$src/src/attention/scores.cu" "$out/src/scores.cu" &&
    cp "'"$T"'/Makefile.repro" "$out/Makefile" ;;
esac
exit 0'
# kerncap-replay: serve counts requests (and, with P6_SELFTEST_DROP=1,
# removes its socket once ready: validate must then fall back); submit
# connects; validate is the one-shot replay.
script "$T"/kbin/kerncap-replay 'echo "$*" >> "'"$T"'/replay-calls.log"
case $1 in
serve)
  for a in "$@"; do case $a in --socket=*) sock=${a#--socket=} ;; esac; done
  exec python3 -c "
import os, signal, socket, sys, threading, time
path = sys.argv[2]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(4)
n = 0
def stop(*_):
    if os.path.exists(path): os.unlink(path)
    print(\"kerncap-replay serve: stopped after %d request(s)\" % n, file=sys.stderr, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
if os.environ.get(\"P6_SELFTEST_DROP\") == \"1\":
    threading.Timer(0.3, lambda: os.unlink(path)).start()
while True:
    c = s.accept()[0]; n += 1; c.close()
" serve "$sock" ;;
submit)
  for a in "$@"; do case $a in --socket=*) sock=${a#--socket=} ;; esac; done
  python3 -c "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])" "$sock" &&
    echo "validation passed (stand-in)" ;;
validate) sleep 0.3; echo "validation passed (stand-in one-shot)" ;;
esac'
touch "$T"/agent.so

run() {  # NAME [VAR=VALUE...]: runs run_p6.sh; output in $T/NAME.out, logs in $T/NAME
  local name=$1
  shift
  env PATH="$T/bin:$PATH" KERNCAP_BIN="$T/kbin" KERNCAP_AGENT="$T/agent.so" \
    KERNCAP_P6_DIR="$T/work-$name" KERNCAP_P6_REPS=2 "$@" \
    timeout 300 bash "$HERE/run_p6.sh" "$T/$name" > "$T/$name.out" 2>&1
}
json() {  # NAME KEY: a BENCH_JSON value
  grep -h '^BENCH_JSON' "$T/$1.out" | grep -o "\"$2\":[^,}]*" | cut -d: -f2
}
alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2> /dev/null; }
positive() { awk -v v="$1" -v m="$2" 'BEGIN { exit !(v >= m) }'; }

app_sum() { find "$HERE/app" -type f -print0 | sort -z | xargs -0 cat | cksum; }
app_before=$(app_sum)

echo "selftest: resident mode (make serve, then submit)"
run served
rc=$?
check "run_p6.sh exits 0 (got $rc)" test "$rc" = 0
check "BENCH_JSON served:true" test "$(json served served)" = true
check "BENCH_JSON submits:2" test "$(json served submits)" = 2
check "two submits reached the server" grep -q 'stopped after 2 request(s)' "$T/served/serve.log"
check "every (b) rep says it went through submit" \
  test "$(grep -c '(b) rep [0-9].*submit to the server' "$T/served.out")" = 2
check "the server was stopped" bash -c "! kill -0 \$(cat '$T/work-served/repro/build/serve.pid' 2>/dev/null || echo 999999) 2>/dev/null && ! test -S '$T/work-served/repro/build/serve.sock'"
check "recompile time >= the stand-in nvcc's 0.15 s" positive "$(json served kerncap_recompile_s)" 0.15
check "validate time >= 0" positive "$(json served kerncap_validate_s)" 0
check "recompile + validate <= kerncap_s + 0.05" \
  awk -v c="$(json served kerncap_recompile_s)" -v v="$(json served kerncap_validate_s)" \
  -v s="$(json served kerncap_s)" 'BEGIN { exit !(c + v <= s + 0.05) }'
check "nvcc phases logged" grep -q 'nvcc phases (median of 3, ms): cicc 150' "$T/served.out"
check "loop (a) unchanged: kcsim runs each rep" test "$(grep -c '(a) rep' "$T/served.out")" = 2

echo "selftest: KERNCAP_P6_SERVE=0 (one-shot replays)"
run oneshot KERNCAP_P6_SERVE=0
check "exit 0" test $? = 0
check "BENCH_JSON served:false, submits:0" test "$(json oneshot served)/$(json oneshot submits)" = false/0
check "no server started" test ! -e "$T/work-oneshot/repro/build/serve.pid"

echo "selftest: a server whose socket disappears (validate falls back to one-shot)"
run dropped P6_SELFTEST_DROP=1
check "BENCH_JSON served:false" test "$(json dropped served)" = false
check "the log says validate did not go through submit" \
  grep -q 'validate did NOT go through submit' "$T/dropped.out"

check "the application's own sources were not edited (only the copy)" test "$(app_sum)" = "$app_before"

if ((fails)); then
  for n in served oneshot dropped; do echo "--- $n.out"; cat "$T/$n.out" 2> /dev/null; done
  echo "selftest: $fails check(s) FAILED"
  exit 1
fi
echo "selftest: all checks passed"
