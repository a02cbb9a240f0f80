#!/usr/bin/env bash
# bench/tune, checked end to end: a short measurement of allreduce, bcast and allgather on
# 2 and 3 ranks of this machine writes a tuning table; the table must hold rows for every
# measured collective and shape, load in kestrel-info (as every process loads it at start),
# and coll_check (every collective against a serial reference) must pass with it through the
# message algorithms it chooses. Needs the release build (ci/test.sh builds first).
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/tune-check/coll-tuning.conf
rm -rf target/tune-check
/usr/bin/python3 bench/tune --no-build --np 2,3 --sizes 8:16384 --iters 20 --rounds 1 \
  --bench allreduce --bench bcast --bench allgather --out "$out" >target/tune-check.shown \
  2>target/tune-check.log \
  || { echo "ci/tune-check: bench/tune failed:" >&2; tail -n 20 target/tune-check.log >&2; exit 1; }
head -n 1 "$out" | grep -qx 'kestrel-coll-tuning 1' \
  || { echo "ci/tune-check: $out lacks its header line" >&2; exit 1; }
for coll in allreduce bcast allgather; do
  for ranks in '2' '3-\*'; do
    grep -Eq "^$coll +node +$ranks +0 [a-z_]+$" "$out" \
      || { echo "ci/tune-check: no '$coll node $ranks 0 ...' row in $out:" >&2; cat "$out" >&2; exit 1; }
  done
done
KESTREL_COLL_TUNING_FILE="$PWD/$out" target/release/kestrel-info --coll >/dev/null
target/release/kestrel-run --oversubscribe -n 3 --mca coll_shm false \
  --mca coll_tuning_file "$PWD/$out" target/release/examples/coll_check full | grep -q passed \
  || { echo "ci/tune-check: coll_check failed with the tuned table $out" >&2; exit 1; }
echo "ci/tune-check: bench/tune wrote a valid table ($(grep -Evc '^#|^$|^kestrel-coll-tuning' "$out") rows), coll_check passed with it"
