#!/usr/bin/env bash
# Runs every cargo-fuzz target of the repository (the crates fuzz/ and usnic/fuzz/) for SECONDS
# seconds each (default 600), prints one line per target (target, seconds, executions, result)
# and fails if any target found a crash, a hang or an oversized allocation.
#
#   bash ci/fuzz.sh [SECONDS] [TARGET...]
#
# With TARGETs, only those run (two invocations with disjoint targets use both cores).
#
# New inputs, crash artifacts and logs go to a scratch directory under /tmp, never into the
# committed corpora (fuzz/corpus/<target>, usnic/fuzz/corpus/<target>); copy an interesting
# input into a target's seed_corpus() by hand. Those corpora are replayed by the unit tests, so
# `cargo test --workspace` (ci/test.sh) covers them without this script.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS] [TARGET...]  (seconds per target, default 600; all targets by default)" >&2
  exit 2
fi
shift || true
wanted=("$@")
selected() {
  [[ ${#wanted[@]} -eq 0 ]] && return 0
  local w
  for w in "${wanted[@]}"; do [[ $w == "$1" ]] && return 0; done
  return 1
}

# cargo-fuzz passes sanitizer flags only nightly accepts; this lets the stable toolchain take them.
export RUSTC_BOOTSTRAP=1
# libFuzzer's allocation limit (below) also counts what the Rust backtrace symbolizer allocates
# after a panic, which would turn every panic into an "out-of-memory" report. Without the
# backtrace a panic is reported as one; `cargo fuzz run <target> <artifact>` shows the trace.
export RUST_BACKTRACE=0

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz
fi

scratch=$(mktemp -d /tmp/kestrel-fuzz.XXXXXX)
echo "fuzz: new inputs, artifacts and logs in $scratch"

# -timeout: an input that runs 10 s is a hang.
# -malloc_limit_mb: inputs stay below a few KiB (libFuzzer's -max_len follows the largest seed,
#   4 KiB at least), so one allocation of more than 1 MiB was sized by a length or count field
#   the decoder trusted beyond what the input holds.
options=(-max_total_time="$seconds" -timeout=10 -malloc_limit_mb=1 -print_final_stats=1)

summary=()
failed=0
# Each project directory holds a fuzz/ crate of its own (its own workspace and lock file).
for project in . usnic; do
  # Debug assertions (-a) make integer overflow a panic, as in the unit tests.
  (cd "$project" && cargo fuzz build -a)
  for target in $(cd "$project" && cargo fuzz list); do
    selected "$target" || continue
    dir="$scratch/$target"
    mkdir -p "$dir/new"
    status=0
    (cd "$project" && cargo fuzz run -a "$target" "$dir/new" "fuzz/corpus/$target" -- \
      "${options[@]}" -artifact_prefix="$dir/") >"$dir/log" 2>&1 || status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    ran=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$dir/log" | tail -n 1)
    if [[ $status -eq 0 ]]; then
      result=ok
    else
      failed=1
      artifact=$(find "$dir" -maxdepth 1 -type f \
        \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) | head -n 1)
      panic=$(grep -m 1 -A 1 'panicked at' "$dir/log" | tail -n 1 || true)
      if [[ -n $artifact ]]; then
        result="FOUND $(basename "$artifact" | cut -d- -f1) in $artifact${panic:+ ($panic)}"
      else
        result="FAILED (exit $status, see $dir/log)"
      fi
    fi
    summary+=("$(printf '%-20s %8s %12s  %s' "$target" "${ran:-$seconds}" "${execs:-?}" "$result")")
  done
done

echo
printf 'fuzz: %-20s %8s %12s  %s\n' target seconds executions result
for line in "${summary[@]}"; do
  echo "fuzz: $line"
done
if [[ $failed -ne 0 ]]; then
  echo "fuzz: a target failed; reproduce with: cargo fuzz run -a <target> <artifact> (from the project directory)" >&2
  exit 1
fi
