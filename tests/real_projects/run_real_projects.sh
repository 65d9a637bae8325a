#!/usr/bin/env bash
# run_real_projects.sh: the native reproducer on public CUDA projects built with
# their own build systems. For each project of the list (projects.list):
#   1. its source: a fetched mirror (git --git-dir=MIRROR archive REF), else
#      git clone --depth 1 of the public URL, else a local folder;
#   2. its own build (CMake / a plain Makefile under bear) with -lineinfo for
#      sm_$CUDA_ARCH only, building only what holds the chosen kernel;
#   3. the kernel's cubin out of the object or binary (cuobjdump -xelf);
#   4. a capture of it (repro_wrap_cubin, as repro_generator_e2e_test makes its
#      captures), then `kerncapctl repro CAP --out DIR --source-dir SRC
#      [--compile-commands DB]`;
#   5. `make -C DIR recompile`, and the recompiled kernel's SASS against the
#      captured one's (cuobjdump -sass -fun, addresses and encodings ignored);
#   6. the fast recompile path: whether the minimal unit verified at
#      generation (kerncap.json edit.minimal_unit, minimal_unit.h), then the
#      medians of REPS (default 3) timed `make recompile` after touching the
#      edit target and `make recompile-full` (the whole unit), and the whole
#      unit's SASS against the captured one's as well.
# Prints a table and writes $WORK/summary.json. Not a ctest: it needs the
# projects' sources (network or mirrors) and minutes of compiling. Fetched code
# and builds stay under $WORK (default $TMPDIR/kerncap-real-projects), never in
# the repository.
#
#   tests/real_projects/run_real_projects.sh [--only NAME[,NAME]] [--list FILE]
#       [--work DIR] [--build-dir KERNCAP_BUILD] [--mirrors DIR] [--keep]
#
# Tools: nvcc (NVCC or PATH or /usr/local/cuda/bin), cuobjdump (CUOBJDUMP or
# PATH; pip's nvidia-cuda-cuobjdump provides one) and nvdisasm beside it or on
# PATH (nvidia-cuda-nvdisasm), bear for plain Makefiles,
# cmake, ninja, make. Exit status: 0 when every project recompiled, 1 otherwise.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
list="$here/projects.list"
work="${TMPDIR:-/tmp}/kerncap-real-projects"
kbuild="${KERNCAP_BUILD_DIR:-$repo/build}"
mirrors="${KC_MIRRORS:-}"  # folder of fetched mirrors (OWNER+NAME/repo); none: git clone
only=""
while (($#)); do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --list) list="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --build-dir) kbuild="$2"; shift 2 ;;
    --mirrors) mirrors="$2"; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

find_tool() {  # name [extra dirs...]
  local name="$1"; shift
  command -v "$name" 2>/dev/null && return 0
  local d; for d in "$@"; do [[ -x "$d/$name" ]] && { echo "$d/$name"; return 0; }; done
  return 1
}
NVCC="${NVCC:-$(find_tool nvcc /usr/local/cuda/bin)}" || { echo "nvcc not found" >&2; exit 2; }
CUOBJDUMP="${CUOBJDUMP:-$(find_tool cuobjdump /usr/local/cuda/bin)}" ||
  { echo "cuobjdump not found (CUDA toolkit, or pip install nvidia-cuda-cuobjdump)" >&2; exit 2; }
KERNCAPCTL="$kbuild/bin/kerncapctl"
WRAP="$kbuild/bin/repro_wrap_cubin"
for t in "$KERNCAPCTL" "$WRAP"; do
  [[ -x "$t" ]] || { echo "$t not built (ninja -C $kbuild kerncapctl repro_wrap_cubin)" >&2; exit 2; }
done
export NVCC CUDA_ARCH="${CUDA_ARCH:-90}" JOBS="${JOBS:-2}"
# cuobjdump -sass runs nvdisasm from PATH: a pip cuobjdump's comes beside it
# (nvidia-cuda-nvdisasm); without one every SASS column says "no SASS".
export PATH="$(dirname "$NVCC"):$(dirname "$CUOBJDUMP"):$PATH"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

# The SASS of one function, without addresses, encodings or file names.
sass_of() {  # cubin symbol
  "$CUOBJDUMP" -sass -fun "$2" "$1" 2>/dev/null |
    grep -E '^[[:space:]]+/\*[0-9a-f]{4,}\*/' |
    sed -E 's#/\*[0-9a-f]+\*/##; s#/\* 0x[0-9a-f]+ \*/##g; s/[[:space:]]+/ /g; s/ +$//'
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

json_escape() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().rstrip("\n")))'; }

get_source() {  # source ref paths dest -> prints how
  local source="$1" ref="$2" paths="$3" dest="$4"
  rm -rf "$dest"; mkdir -p "$dest"
  if [[ "$source" == tarball:* ]]; then
    local tarball="${source#tarball:}"
    [[ "$tarball" == /* ]] || tarball="$repo/$tarball"
    [[ -f "$tarball" ]] || { echo "tarball $tarball missing" >&2; return 1; }
    tar -xf "$tarball" -C "$dest" && echo "tarball $tarball"
    return
  fi
  if [[ "$source" == local:* ]]; then
    local dir="${source#local:}"
    [[ -d "$dir" ]] || { echo "local folder $dir missing" >&2; return 1; }
    cp -a "$dir/." "$dest/" && echo "local folder $dir"
    return
  fi
  local slug="${source#github:}"
  local mirror="$mirrors/${slug/\//+}/repo"
  if [[ -n "$mirrors" && -d "$mirror" ]]; then
    local rev="$ref"
    git --git-dir="$mirror" rev-parse -q --verify "$rev^{commit}" >/dev/null || rev=HEAD
    local p=(); [[ "$paths" == "." ]] || read -r -a p <<<"$paths"
    git --git-dir="$mirror" archive "$rev" "${p[@]}" | tar -x -C "$dest" || return 1
    echo "mirror $mirror @ $(git --git-dir="$mirror" rev-parse --short "$rev") ($rev)"
    return
  fi
  local args=(--depth 1); [[ "$ref" == HEAD ]] || args+=(--branch "$ref")
  git clone -q "${args[@]}" "https://github.com/$slug.git" "$dest" || return 1
  echo "git clone https://github.com/$slug.git ($ref)"
}

rows=()
summary="["
failures=0
while IFS='|' read -r name bsys kcase source ref paths kernel artifact recipe; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  if [[ -n "$only" && ",$only," != *",$name,"* ]]; then continue; fi
  slug="${name//\//_}"
  dir="$work/$slug"; SRC="$dir/src"; BUILD="$dir/build"; out="$dir/repro"
  mkdir -p "$dir"; log="$dir/log.txt"; : >"$log"
  echo "== $name ($bsys; $kcase)" | tee -a "$log"
  unit="-"; origin="-"; recompiled="no"; same="-"; note=""; mangled=""
  minimal="-"; minimal_reason=""; t_recompile="-"; t_full="-"; same_full="-"
  start=$(date +%s)
  if ! how=$(get_source "$source" "$ref" "$paths" "$SRC" 2>>"$log"); then
    note="source not obtained (see $log)"
  else
    echo "source: $how" >>"$log"
    rm -rf "$BUILD"; mkdir -p "$BUILD"
    export SRC BUILD
    if ! (cd "$SRC" && bash -c "$recipe") >>"$log" 2>&1; then
      note="the project's build failed (see $log)"
    else
      if [[ "$artifact" == *'*'* ]]; then
        art=$(find "$BUILD" -path "$BUILD/$artifact" -type f | head -n 1)
      elif [[ "$artifact" == /* ]]; then art="$artifact"; else art="$BUILD/$artifact"; fi
      ex="$dir/extract"; rm -rf "$ex"; mkdir -p "$ex"
      if [[ -z "$art" || ! -f "$art" ]]; then
        note="artifact $artifact not built"
      elif ! (cd "$ex" && "$CUOBJDUMP" -xelf all "$art") >>"$log" 2>&1; then
        note="cuobjdump -xelf failed on $art"
      else
        cubin=""
        for c in "$ex"/*sm_"$CUDA_ARCH"*.cubin; do
          [[ -f "$c" ]] || continue
          if m=$("$WRAP" --cubin="$c" --kernel="$kernel" --arch="sm_$CUDA_ARCH" --out="$dir/capture.kcap" 2>>"$log"); then
            cubin="$c"; mangled=$(head -n 1 <<<"$m"); break
          fi
        done
        if [[ -z "$cubin" ]]; then
          note="no sm_$CUDA_ARCH cubin of $art holds a kernel matching $kernel"
        else
          db=(); [[ -f "$BUILD/compile_commands.json" ]] && db=(--compile-commands "$BUILD/compile_commands.json")
          rm -rf "$out"
          if ! "$KERNCAPCTL" --json repro "$dir/capture.kcap" --out "$out" --source-dir "$SRC" "${db[@]}" \
                >"$dir/repro.json" 2>>"$log"; then
            note="kerncapctl repro failed (see $log)"
          else
            read -r unit origin < <(python3 - "$out/kerncap.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
s, c = p["source"], p["compile"]
unit = s.get("translation_unit", {}).get("project") or ("none:" + s.get("outcome", "?"))
sel = s.get("unit_selection", {}).get("method")
print(unit, c.get("origin", "?") + (", " + sel if sel else ""))
EOF
)
            if make -C "$out" NVCC="$NVCC" recompile >>"$log" 2>&1; then
              recompiled="yes"
              a=$(sass_of "$cubin" "$mangled"); b=$(sass_of "$out/build/kernel.cubin" "$mangled")
              if [[ -z "$a" ]]; then same="no SASS"
              elif [[ "$a" == "$b" ]]; then same="yes ($(wc -l <<<"$a") instr)"
              else
                same="no ($(diff <(echo "$a") <(echo "$b") | grep -c '^[<>]') lines differ)"
                diff <(echo "$a") <(echo "$b") | head -n 20 >>"$log"
              fi
              # The fast path against the whole unit, timed the same way.
              IFS=$'\t' read -r minimal minimal_reason edit_file < <(python3 - "$out/kerncap.json" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1])).get("edit") or {}
m = e.get("minimal_unit") or {}
print(m.get("outcome", "none"), (m.get("reason") or "-").replace("\t", " ")[:200],
      e.get("file", "-"), sep="\t")
EOF
)
              [[ "$minimal_reason" == "-" ]] && minimal_reason=""
              ts=(); tf=()
              for ((rep = 0; rep < ${REPS:-3}; rep++)); do
                touch "$out/$edit_file"
                t0=$(date +%s.%N)
                make -C "$out" NVCC="$NVCC" recompile >>"$log" 2>&1 || break
                ts+=("$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')")
                t0=$(date +%s.%N)
                make -C "$out" NVCC="$NVCC" recompile-full >>"$log" 2>&1 || break
                tf+=("$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')")
              done
              ((${#ts[@]})) && t_recompile=$(median "${ts[@]}")
              ((${#tf[@]})) && t_full=$(median "${tf[@]}")
              if ((${#tf[@]})); then
                c=$(sass_of "$out/build/kernel.cubin" "$mangled")
                [[ "$a" == "$c" ]] && same_full="yes" || same_full="no"
              fi
            else
              note="make recompile failed: $(grep -m1 -iE 'error|fatal' "$log" | cut -c1-160)"
            fi
          fi
        fi
      fi
    fi
  fi
  secs=$(( $(date +%s) - start ))
  [[ "$recompiled" == yes ]] || failures=$((failures + 1))
  rows+=("$name|$bsys|$kernel|$unit ($origin)|$recompiled|$same|$minimal|${t_recompile}s|${t_full}s|$same_full|${secs}s|$note${minimal_reason:+ minimal unit: $minimal_reason}")
  summary+=$(printf '%s{"project":%s,"build_system":%s,"case":%s,"kernel":%s,"symbol":%s,"unit":%s,"compile_origin":%s,"recompile":%s,"same_sass":%s,"minimal_unit":%s,"minimal_reason":%s,"recompile_s":%s,"recompile_full_s":%s,"same_sass_full":%s,"seconds":%d,"note":%s,"log":%s}' \
    "$([[ "$summary" == "[" ]] || echo ,)" \
    "$(json_escape <<<"$name")" "$(json_escape <<<"$bsys")" "$(json_escape <<<"$kcase")" \
    "$(json_escape <<<"$kernel")" "$(json_escape <<<"$mangled")" "$(json_escape <<<"$unit")" \
    "$(json_escape <<<"$origin")" "$([[ "$recompiled" == yes ]] && echo true || echo false)" \
    "$(json_escape <<<"$same")" "$(json_escape <<<"$minimal")" "$(json_escape <<<"$minimal_reason")" \
    "$(json_escape <<<"$t_recompile")" "$(json_escape <<<"$t_full")" "$(json_escape <<<"$same_full")" \
    "$secs" "$(json_escape <<<"$note")" "$(json_escape <<<"$log")")
done <"$list"
summary+="]"
echo "$summary" | python3 -m json.tool >"$work/summary.json"

printf '\n| project | build system | kernel | unit found (compile command) | recompile | same SASS | minimal unit | make recompile | recompile-full | full same SASS | time | note |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for r in "${rows[@]}"; do printf '| %s |\n' "${r//|/ | }"; done
echo
echo "summary: $work/summary.json"
((failures == 0))
