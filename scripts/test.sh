#!/usr/bin/env bash
# The test entry point (the README's test command; CI runs it through .ci/run).
# Installs what is missing, then runs these stages; any failure exits non-zero:
#   docs     scripts/check_docs.py (README and docs: one top heading a page, every repository
#            path and test name they give exists), then the API reference: doxygen with
#            docs/Doxyfile into $BUILD_DIR/doxygen (HTML in html/index.html). Any warning fails
#            (an undocumented public symbol, a broken \param or reference), and the warnings
#            are printed. Seconds; runs first.
#   asan     build-asan/: gcc, -O1 -g1 (line tables: file and line in every report), AddressSanitizer + UndefinedBehaviorSanitizer
#            (TAPEGRAD_SANITIZE=address,undefined, no recovery), every library test
#            executable (tests_<folder>, tests_golden, tests_readme: the list CMake writes
#            to build-asan/tests/library_tests.txt) with the leak checker on. Any sanitizer
#            report fails.
#   fuzz     build-fuzz/: clang, libFuzzer + ASan + UBSan; every fuzz/fuzz_<name> target
#            runs for TAPEGRAD_FUZZ_SECONDS (default 60) from fuzz/corpus/<name>, one a
#            core at a time. Any
#            crash, sanitizer report or leak fails; the input is kept in
#            build-fuzz/artifacts/.
#   native   build-native/: Release, TAPEGRAD_ISA=native (everything -march=native, one kernel
#            level: the CI machine's), examples off: the whole test suite through ctest,
#            so the build users make for themselves is tested too. Only the consumer tests
#            (label consumer: the installed package, nothing ISA-dependent) are left to the
#            release stage.
#   release  build/: scripts/build.sh, the default portable build (x86-64-v2 libraries, the
#            hot kernels once per level: baseline, avx2, avx512; docs/isa.md), configured with
#            TAPEGRAD_WERROR=ON (any compiler warning fails the stage), and ctest.
#            ctest includes label isa: scripts/check_isa_symbols.sh (no AVX2/AVX-512 code
#            outside the kernel variants) and the dispatcher, [thresholds], norm, GEMM and
#            golden tests with the kernels forced (TAPEGRAD_ISA, OPENBLAS_CORETYPE) to each
#            level the machine runs, from the same build. Last, so the script's closing
#            lines are ctest's "N tests passed/failed" summary.
#   In both ctest stages each Catch2 test case is its own ctest entry, and the entry
#   catch_registration fails, naming them, when a test case an executable lists is run by no
#   entry or an entry runs another number of cases than its own (docs/internals.md, Testing).
# TAPEGRAD_TEST_STAGES selects stages (default "docs asan fuzz native release"), e.g.
#   TAPEGRAD_TEST_STAGES=release bash scripts/test.sh
# Build folders: BUILD_DIR (build), ASAN_BUILD_DIR (build-asan), FUZZ_BUILD_DIR (build-fuzz),
# NATIVE_BUILD_DIR (build-native).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# setup.sh installs the ONNX engines (python3-onnx, python3-opencv, onnxruntime-node): the
# onnx_engines test fails, rather than skips, when one is missing.
export TAPEGRAD_REQUIRE_ONNX_ENGINES="${TAPEGRAD_REQUIRE_ONNX_ENGINES:-1}"

stages=" ${TAPEGRAD_TEST_STAGES:-docs asan fuzz native release} "
jobs="$(nproc)"
fuzz_seconds="${TAPEGRAD_FUZZ_SECONDS:-60}"
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # the tests' precompiled header (tests/CMakeLists.txt) is cached only with these
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
fi
started=$SECONDS
asan_dir="${ASAN_BUILD_DIR:-build-asan}"
fuzz_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
release_dir="${BUILD_DIR:-build}"
native_dir="${NATIVE_BUILD_DIR:-build-native}"

configure() {  # configure <build-dir> <cmake args...>: quiet unless it fails
  local dir="$1"
  shift
  cmake -S . -B "$dir" "${launcher[@]}" "$@" > "$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log"
    exit 1
  }
}

stage_done() { echo "== $1: passed in $((SECONDS - $2)) s"; }

if [[ "$stages" == *" docs "* ]]; then
  t0=$SECONDS
  docs_dir="$release_dir/doxygen"
  echo "== docs: the API reference (doxygen docs/Doxyfile -> $docs_dir/html), no warning allowed"
  mkdir -p "$docs_dir"
  # Doxygen checks the free functions of a namespace only when the namespace itself has a
  # description (docs/namespaces.dox): a namespace missing there would hide its functions
  # from both the reference and the warnings. Every tapegrad namespace opened at the start
  # of a line in the documented headers (detail ones excepted) must be described.
  read -r -a docs_inputs <<< "$(sed -n 's/^INPUT *= *//p' docs/Doxyfile)"
  docs_folders=()
  for d in "${docs_inputs[@]}"; do [[ -d "$d" ]] && docs_folders+=("$d"); done
  missing_ns=()
  while read -r ns; do
    grep -qxF "/// \\namespace $ns" docs/namespaces.dox || missing_ns+=("$ns")
  done < <(find "${docs_folders[@]}" -name '*.h' -not -path '*/kernels/*' -print0 | sort -z |
    xargs -0 awk 'FNR == 1 { depth = 0 }
      /^namespace [A-Za-z_:]+ \{/ { n = $2; if (depth > 0) n = stack[depth] "::" n; stack[++depth] = n; print n; next }
      /^\}( |$)/ { if (depth > 0) depth-- }' | sort -u | grep '^tapegrad' | grep -v 'detail')
  if [[ ${#missing_ns[@]} -gt 0 ]]; then
    echo "== docs: FAILED, namespaces without a description in docs/namespaces.dox: ${missing_ns[*]}"
    exit 1
  fi
  # README.md and docs/*.md: one top heading a page, every repository path and test
  # executable/tag they name exists (scripts/check_docs.py).
  python3 scripts/check_docs.py || { echo "== docs: FAILED, README/docs name things the tree does not have (above)"; exit 1; }
  # WARN_AS_ERROR=FAIL_ON_WARNINGS in the Doxyfile: doxygen writes every warning, then exits
  # non-zero. The warnings go to a log, printed when there are any.
  if ! ( cat docs/Doxyfile; echo "OUTPUT_DIRECTORY=$docs_dir"; echo "WARN_LOGFILE=$docs_dir/warnings.log" ) |
      doxygen - > "$docs_dir/doxygen.log" 2>&1 || [[ -s "$docs_dir/warnings.log" ]]; then
    cat "$docs_dir/doxygen.log" "$docs_dir/warnings.log" 2> /dev/null
    echo "== docs: FAILED, $(wc -l < "$docs_dir/warnings.log" 2> /dev/null || echo ?) doxygen warning line(s) above" \
      "(document each symbol in its header; see docs/Doxyfile)"
    exit 1
  fi
  stage_done docs "$t0"
fi

if [[ "$stages" == *" asan "* ]]; then
  t0=$SECONDS
  echo "== asan: AddressSanitizer + UndefinedBehaviorSanitizer build of the test suite"
  configure "$asan_dir" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    -DTAPEGRAD_SANITIZE=address,undefined \
    -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_BUILD_STUDIES=OFF -DTAPEGRAD_BUILD_BENCH=OFF -DTAPEGRAD_FUZZ=OFF
  cmake --build "$asan_dir" -j "$jobs" --target library_tests
  echo "== asan: running every test case of every library test executable (leak checker on), $jobs at a time"
  # halt_on_error + -fno-sanitize-recover: the first report ends the run with a non-zero
  # status. detect_leaks reports at exit whatever each executable leaked. Each executable's
  # output goes to its log, printed whole when it fails.
  run_asan() {  # run_asan <exe>
    local exe="$1" log="$asan_dir/${1##*/}.asan.log"
    if ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS="$jobs" "$exe" > "$log" 2>&1; then
      echo "-- asan: ${exe##*/}: $(grep -E '^All tests passed|^test cases:' "$log" | tail -n 1)"
    else
      cat "$log"
      echo "== asan: ${exe##*/} FAILED (log $log)"
      return 1
    fi
  }
  pids=()
  while read -r exe; do
    [[ -n "$exe" ]] || continue
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
    run_asan "$exe" &
    pids+=($!)
  done < "$asan_dir/tests/library_tests.txt"
  asan_failed=0
  for pid in "${pids[@]}"; do wait "$pid" || asan_failed=1; done  # bash keeps each child's status
  [[ $asan_failed == 0 ]] || exit 1
  stage_done asan "$t0"
fi

if [[ "$stages" == *" fuzz "* ]]; then
  t0=$SECONDS
  echo "== fuzz: libFuzzer targets (clang, ASan + UBSan), ${fuzz_seconds} s each"
  configure "$fuzz_dir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
    -DTAPEGRAD_FUZZ=ON \
    -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_BUILD_STUDIES=OFF -DTAPEGRAD_BUILD_BENCH=OFF
  cmake --build "$fuzz_dir" -j "$jobs" --target tapegrad_fuzzers
  mkdir -p "$fuzz_dir/artifacts"
  # One fuzzer a core: each runs single-threaded for fuzz_seconds, $jobs of them at once.
  run_fuzzer() {  # run_fuzzer <exe>: exit status 0, or 1 with the failure's tail printed
    local exe="$1" name="${1##*/fuzz_}"
    local seeds="fuzz/corpus/$name"
    local scratch="$fuzz_dir/corpus/$name"  # new inputs go here; the committed seeds stay as they are
    local log="$fuzz_dir/fuzz_$name.log"
    local dict=()
    mkdir -p "$scratch"
    [[ -f "fuzz/$name.dict" ]] && dict=("-dict=fuzz/$name.dict")
    if ! "$exe" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$fuzz_dir/artifacts/$name-" "${dict[@]}" "$scratch" "$seeds" > "$log" 2>&1; then
      tail -n 60 "$log"
      echo "== fuzz: fuzz_$name FAILED; reproduce with: $exe $fuzz_dir/artifacts/$name-*"
      return 1
    fi
    echo "-- fuzz_$name: seeds $seeds, log $log: $(grep -E "^Done|stat::number_of_executed_units|stat::new_units_added" "$log" | tr '\n' ' ')"
  }
  fuzzers=()
  for exe in "$fuzz_dir"/fuzz/fuzz_*; do [[ -f "$exe" && -x "$exe" ]] && fuzzers+=("$exe"); done
  fuzz_failed=0
  for ((i = 0; i < ${#fuzzers[@]}; i += jobs)); do
    pids=()
    for exe in "${fuzzers[@]:i:jobs}"; do
      run_fuzzer "$exe" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || fuzz_failed=1; done
  done
  [[ $fuzz_failed == 0 ]] || exit 1
  stage_done fuzz "$t0"
fi

if [[ "$stages" == *" native "* ]]; then
  t0=$SECONDS
  echo "== native: the -march=native build (TAPEGRAD_ISA=native) of the library and the whole test suite"
  configure "$native_dir" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_ISA=native \
    -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_BUILD_BENCH=OFF -DTAPEGRAD_FUZZ=OFF
  cmake --build "$native_dir" -j "$jobs"
  OMP_NUM_THREADS="$jobs" ctest --test-dir "$native_dir" --output-on-failure -j "$jobs" -LE consumer
  stage_done native "$t0"
fi

if [[ "$stages" == *" release "* ]]; then
  t0=$SECONDS
  echo "== release: build and ctest (all stages so far took $((SECONDS - started)) s)"
  BUILD_DIR="$release_dir" scripts/build.sh -DTAPEGRAD_WERROR=ON  # warning-free: any warning fails the stage
  ctest --test-dir "$release_dir" --output-on-failure -j "$jobs"
fi
