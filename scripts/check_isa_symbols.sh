#!/usr/bin/env bash
# Checks that a portable build keeps every AVX2 / AVX-512 instruction inside the per-ISA kernel
# variants (docs/isa.md, core/kernels/isa_dispatch.h):
#  1. every global or weak symbol defined by a variant object (<file>.avx2.cpp.o,
#     <file>.avx512.cpp.o) is in that level's namespaces (avx2 / isa_avx2 / Eigen_avx2,
#     resp. avx512 / ...): the linker keeps one copy of a weak symbol (an inline function,
#     a template), so one compiled for AVX-512 and shared with baseline code could be the
#     copy every CPU runs;
#  2. no function of any object uses a ymm or zmm register unless it is in an avx2 or avx512
#     namespace, and no function outside an avx512 namespace uses a zmm register.
# Usage: scripts/check_isa_symbols.sh <build-dir> [library.a ...]: the archives given (ctest
# passes the library targets' files), else every libtapegrad_*.a under the build directory
# (which may include stale archives of targets that no longer exist).
# Exit status 0 when clean, 1 with the offending symbols listed, 2 on a usage error.
set -euo pipefail
build="${1:?usage: check_isa_symbols.sh <build-dir> [library.a ...]}"
shift
if [[ $# -gt 0 ]]; then
  libs=()
  for lib in "$@"; do
    [[ -f "$lib" ]] || { echo "check_isa_symbols: no archive $lib" >&2; exit 2; }
    libs+=("$(realpath "$lib")")
  done
else
  mapfile -t libs < <(find "$(realpath "$build")" -name 'libtapegrad_*.a' | sort)
fi
if [[ ${#libs[@]} -eq 0 ]]; then
  echo "check_isa_symbols: no libtapegrad_*.a under $build" >&2
  exit 2
fi
marker_avx2='(4avx2|8isa_avx2|10Eigen_avx2)'
marker_avx512='(6avx512|10isa_avx512|12Eigen_avx512)'
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bad=0
variants=0
for lib in "${libs[@]}"; do
  # 1. the variant objects' exported symbols
  while read -r member; do
    case "$member" in
      *.avx2.cpp.o) marker="$marker_avx2" ;;
      *.avx512.cpp.o) marker="$marker_avx512" ;;
      *) continue ;;
    esac
    variants=$((variants + 1))
    (cd "$tmp" && ar x "$(realpath "$lib")" "$member")
    while read -r sym; do
      [[ "$sym" =~ $marker ]] && continue
      [[ "$sym" == DW.ref.__gxx_personality_v0 ]] && continue  # a pointer to the C++ runtime's personality routine (data)
      echo "check_isa_symbols: ${lib##*/}($member) exports $sym ($(c++filt "$sym")), outside its ISA namespace"
      bad=1
    done < <(nm --defined-only -g "$tmp/$member" | awk '$2 != "U" { print $3 }')
    rm -f "$tmp/$member"
  done < <(ar t "$lib")
  # 2. wide registers outside the variants
  while read -r sym wide; do
    if [[ "$sym" =~ $marker_avx512 ]]; then continue; fi
    if [[ "$sym" =~ $marker_avx2 && "$wide" == ymm ]]; then continue; fi
    echo "check_isa_symbols: ${lib##*/}: $sym ($(c++filt "$sym")) uses $wide registers outside an ISA variant"
    bad=1
  done < <(objdump -d --no-show-raw-insn "$lib" | awk '
      /^[0-9a-f]+ <.*>:$/ { sym = substr($2, 2, length($2) - 3); next }
      /%zmm/ { if (!(sym in z)) { z[sym] = 1; print sym, "zmm" } next }
      /%ymm/ { if (!(sym in y)) { y[sym] = 1; print sym, "ymm" } }' | sort -u)
done
if [[ $variants -eq 0 ]]; then
  echo "check_isa_symbols: no ISA variant objects in $build (not a portable build?)" >&2
  exit 2
fi
if [[ $bad -ne 0 ]]; then
  echo "check_isa_symbols: FAILED (see docs/isa.md, 'The one-definition pitfall')"
  exit 1
fi
echo "check_isa_symbols: ${#libs[@]} libraries, $variants variant objects: no AVX2/AVX-512 code outside the variants"
