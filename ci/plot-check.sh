#!/usr/bin/env bash
# bench/compare --plot and bench/scaling --plot, checked: a short interleaved run of a point-to-point test, a
# collective and the barrier (no size column) on Kestrel (Rust and C), Open MPI and MPICH,
# drawn as charts; bench/plot --check then requires every chart to be a PNG that decodes
# with one line per stack in its data panel. Open MPI and matplotlib are installed by
# bench/compare itself when missing. Needs the release build (ci/test.sh builds first).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=target/plot-check
rm -rf "$dir"
bash bench/compare --no-build --quick --rounds 1 --sizes 1:4096 \
  --bench osu_latency --bench osu_allreduce --bench osu_barrier --plot "$dir" >"$dir.tables" \
  || { echo "ci/plot-check: bench/compare failed (tables so far in $dir.tables)" >&2; exit 1; }
/usr/bin/python3 bench/plot --check "$dir" --stacks kestrel,kestrel-c,openmpi,mpich
for b in osu_latency osu_allreduce osu_barrier; do
  [ -f "$dir/$b.png" ] || { echo "ci/plot-check: $dir/$b.png was not written" >&2; exit 1; }
done

# bench/scaling --plot: the latency by rank count of the three stacks (kind "scale"), one
# line per stack beside the log2 N and N reference lines.
sdir=target/plot-check-scaling
rm -rf "$sdir"
bash bench/scaling --no-build --ranks 2,4 --rounds 1 --iters 50 --bench osu_barrier --plot "$sdir" >"$sdir.tables" \
  || { echo "ci/plot-check: bench/scaling failed (tables so far in $sdir.tables)" >&2; exit 1; }
/usr/bin/python3 bench/plot --check "$sdir" --stacks kestrel,openmpi,mpich
[ -f "$sdir/osu_barrier.png" ] || { echo "ci/plot-check: $sdir/osu_barrier.png was not written" >&2; exit 1; }
