#!/usr/bin/env bash
# mpi4py's own test suite as an acceptance test of libmpich.so.12: mpi4py built from its PyPI
# source against a stack, then every test module run as its own job (a hang stops one module,
# not the suite) under that stack's launcher.
#
#   ci/mpi4py.sh build kestrel|mpich|both   build mpi4py into $MPI4PY_DIR/venv-<stack>
#   ci/mpi4py.sh run kestrel|mpich NP       run the suite at NP ranks; one line per module,
#                                           then "total: tests T failures F errors E skipped S
#                                           hangs H crashes C" (also written to
#                                           $MPI4PY_DIR/<stack>-<NP>.summary)
#   ci/mpi4py.sh compare NP                 both stacks at NP ranks; exits 1 when Kestrel has
#                                           more failures+errors, any hang or any crash the
#                                           MPICH run does not have
#
# Modules of MPI-IO are not run (not implemented), nor test_util_sync on MPICH (it hangs
# there). Modules that need a package the venv lacks
# (cffi, numba, dlpack) skip those tests themselves.
# Environment: MPI4PY_DIR (default target/mpi4py), MPI4PY_VERSION (4.1.2),
# MPI4PY_TIMEOUT (seconds per module, default 300), MPI4PY_ONLY (regex of modules to run),
# MPI4PY_SKIP (regex of modules not to run; default MPI-IO), MPI4PY_CFLAGS (appended to
# Python's flags for mpi4py's C code; default -O1 -g0: its 13 MB generated MPI.c takes
# ~260 s at this Python's -O3 -g and ~140 s so on a 2-core CI machine, the same build for
# both stacks, and what the suite checks is the MPI library, not mpi4py's own code),
# KESTREL_RUN (the launcher) and KESTREL_LIBDIR (a directory holding libmpich.so.12 to run
# Kestrel's jobs with, e.g. a copy of a build that keeps running while the tree is rebuilt);
# MPICH's jobs always run with no LD_LIBRARY_PATH, so they load MPICH's own library.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

version="${MPI4PY_VERSION:-4.1.2}"
dir="${MPI4PY_DIR:-$root/target/mpi4py}"
timeout_s="${MPI4PY_TIMEOUT:-300}"
mkdir -p "$dir"

# Modules of MPI-IO (not implemented yet).
skip_re="${MPI4PY_SKIP:-^test_(io|file)\$}"
# Modules left out on MPICH only: MPICH 4.0.2 hangs in test_util_sync at 2 ranks (measured
# 2026-12-02, every run). Kestrel hung in it about one run in 12 until operations on a
# process's own window were applied at once (0 hangs in 60 runs since).
skip_mpich_re='^test_util_sync$'

sdist() {
    local tgz="$dir/mpi4py-$version.tar.gz"
    if [ ! -f "$tgz" ]; then
        python3 -m pip download --quiet --no-binary :all: --no-deps "mpi4py==$version" -d "$dir"
    fi
    if [ ! -d "$dir/mpi4py-$version" ]; then
        tar -xzf "$tgz" -C "$dir"
    fi
}

build() {
    local stack="$1" cc
    case "$stack" in
        kestrel) cc="$root/abi/bin/mpicc" ;;
        mpich) cc="mpicc.mpich" ;;
        *) echo "mpi4py.sh: unknown stack $stack (kestrel or mpich)" >&2; exit 2 ;;
    esac
    sdist
    local venv="$dir/venv-$stack" cflags="${MPI4PY_CFLAGS--O1 -g0}"
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import mpi4py' 2>/dev/null \
        && [ -f "$venv/.built-with" ] \
        && [ "$(cat "$venv/.built-with")" = "$version $cc $cflags" ]; then
        echo "mpi4py.sh: $venv already has mpi4py $version"
        return
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    echo "mpi4py.sh: building mpi4py $version with $cc (a few minutes)"
    CFLAGS="$cflags" MPICC="$cc" "$venv/bin/pip" install --quiet --no-cache-dir \
        --no-binary mpi4py "$dir/mpi4py-$version.tar.gz"
    echo "$version $cc $cflags" > "$venv/.built-with"
}

launcher() {
    local stack="$1" np="$2"
    case "$stack" in
        kestrel) echo "env ${KESTREL_LIBDIR:+LD_LIBRARY_PATH=$KESTREL_LIBDIR} ${KESTREL_RUN:-$root/target/release/kestrel-run} --oversubscribe --timeout $timeout_s -n $np" ;;
        mpich) echo "env -u LD_LIBRARY_PATH mpiexec.mpich -n $np" ;;
    esac
}

# Tests left out on both stacks: test_mpiapi's symbol coverage asserts that mpi4py binds
# every MPI-4 function of the library, which a library without MPI-IO cannot pass (it lists
# exactly those functions); it comes back with I/O.
exclude_tests=(testSymbolCoverage)

# One module: prints "module tests failures errors skipped verdict".
run_module() {
    local stack="$1" np="$2" mod="$3" log="$4"
    local py="$dir/venv-$stack/bin/python" rc=0 x=()
    for t in "${exclude_tests[@]}"; do x+=(-x "$t"); done
    # shellcheck disable=SC2046
    (cd "$dir/mpi4py-$version/test" && timeout -k 10 "$((timeout_s + 20))" \
        $(launcher "$stack" "$np") "$py" main.py --no-builddir "${x[@]}" -i "^$mod[.]py\$") >"$log" 2>&1 || rc=$?
    local ran fail err skip verdict
    # Every rank prints its own unittest summary (ranks' lines may run into each other, so
    # nothing is anchored at a line start); the worst one counts.
    ran=$(grep -oE 'Ran [0-9]+ test' "$log" | grep -oE '[0-9]+' | sort -n | tail -1 || true)
    fail=$(grep -oE 'failures=[0-9]+' "$log" | grep -oE '[0-9]+' | sort -n | tail -1 || true)
    err=$(grep -oE 'errors=[0-9]+' "$log" | grep -oE '[0-9]+' | sort -n | tail -1 || true)
    skip=$(grep -oE 'skipped=[0-9]+' "$log" | grep -oE '[0-9]+' | sort -n | tail -1 || true)
    ran=${ran:-0} fail=${fail:-0} err=${err:-0} skip=${skip:-0}
    if [ "$rc" = 124 ] || [ "$rc" = 137 ] || grep -q 'timeout expired\|--timeout' "$log" && [ "$rc" != 0 ] && [ "$ran" = 0 ]; then
        verdict=hang
    elif [ "$rc" -ge 128 ] || grep -qE 'killed by signal|Segmentation fault|core dumped' "$log"; then
        verdict=crash
    elif [ "$rc" != 0 ] && [ "$fail" = 0 ] && [ "$err" = 0 ]; then
        # Nonzero exit with no failures counted: the job died before or after the tests.
        verdict=crash
    elif [ "$fail" != 0 ] || [ "$err" != 0 ]; then
        verdict=failed
    else
        verdict=ok
    fi
    echo "$mod $ran $fail $err $skip $verdict"
}

run() {
    local stack="$1" np="$2"
    local venv="$dir/venv-$stack"
    [ -x "$venv/bin/python" ] || { echo "mpi4py.sh: run 'ci/mpi4py.sh build $stack' first" >&2; exit 2; }
    sdist
    local logs="$dir/logs-$stack-$np"
    rm -rf "$logs"
    mkdir -p "$logs"
    local summary="$dir/$stack-$np.summary"
    : > "$summary"
    local t=0 f=0 e=0 s=0 h=0 c=0
    for path in "$dir/mpi4py-$version"/test/test_*.py; do
        local mod
        mod=$(basename "$path" .py)
        [[ "$mod" =~ $skip_re ]] && continue
        [ "$stack" = mpich ] && [[ "$mod" =~ $skip_mpich_re ]] && continue
        if [ -n "${MPI4PY_ONLY:-}" ] && ! [[ "$mod" =~ $MPI4PY_ONLY ]]; then
            continue
        fi
        local line
        line=$(run_module "$stack" "$np" "$mod" "$logs/$mod.log")
        echo "$line" | tee -a "$summary"
        read -r _ ran fail err skip verdict <<<"$line"
        t=$((t + ran)) f=$((f + fail)) e=$((e + err)) s=$((s + skip))
        [ "$verdict" = hang ] && h=$((h + 1))
        [ "$verdict" = crash ] && c=$((c + 1))
    done
    echo "total: tests $t failures $f errors $e skipped $s hangs $h crashes $c" | tee -a "$summary"
}

compare() {
    local np="$1"
    run mpich "$np" > /dev/null
    run kestrel "$np" > /dev/null
    local m k
    m=$(tail -1 "$dir/mpich-$np.summary")
    k=$(tail -1 "$dir/kestrel-$np.summary")
    echo "mpich   $np ranks: $m"
    echo "kestrel $np ranks: $k"
    echo "modules that differ (module tests failures errors skipped verdict):"
    diff <(sed '$d' "$dir/mpich-$np.summary") <(sed '$d' "$dir/kestrel-$np.summary") | grep '^[<>]' \
        | sed 's/^</  mpich  /; s/^>/  kestrel/' || true
    read -r _ _ _ _ mf _ me _ _ _ mh _ mc <<<"$m"
    read -r _ _ _ _ kf _ ke _ _ _ kh _ kc <<<"$k"
    if [ $((kf + ke)) -gt $((mf + me)) ] || [ "$kh" -gt "$mh" ] || [ "$kc" -gt "$mc" ]; then
        echo "mpi4py.sh: Kestrel does worse than MPICH at $np ranks (logs: $dir/logs-kestrel-$np)" >&2
        return 1
    fi
}

# Both stacks at once (each build compiles one large C file, so two fit two cores).
build_both() {
    sdist
    build mpich > "$dir/build-mpich.log" 2>&1 &
    local m=$!
    build kestrel > "$dir/build-kestrel.log" 2>&1 &
    local k=$!
    local rc=0
    wait "$m" || { rc=1; echo "mpi4py.sh: the MPICH build failed:" >&2; tail -20 "$dir/build-mpich.log" >&2; }
    wait "$k" || { rc=1; echo "mpi4py.sh: the Kestrel build failed:" >&2; tail -20 "$dir/build-kestrel.log" >&2; }
    cat "$dir/build-mpich.log" "$dir/build-kestrel.log"
    return "$rc"
}

case "${1:-}" in
    build) if [ "$2" = both ]; then build_both; else build "$2"; fi ;;
    run) run "$2" "$3" ;;
    compare) compare "$2" ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
esac
