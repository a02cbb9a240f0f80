#!/usr/bin/env bash
# Startup-cost benchmark: kestrel-run vs Open MPI's mpirun vs MPICH's mpiexec, each starting
# N ranks of hello (see bench/src/bin/startup.rs for what is measured and the output format).
# Arguments go to the benchmark: bench/startup.sh [--ranks N] [--runs R] [--warmup W]
# [--out FILE] [--only kestrel|openmpi|mpich]...
set -euo pipefail

# Paths below (target/release/...) are relative to the repository root.
cd "$(dirname "$0")/.."

# Install the MPI implementations only when missing: apt-get needs root and the network,
# and a machine that already has them should not need either.
if ! command -v mpicc.openmpi >/dev/null || ! command -v mpicc.mpich >/dev/null; then
    apt-get update
    apt-get install -y openmpi-bin libopenmpi-dev mpich libmpich-dev
fi

# One build for the launcher, the Rust hello example and the benchmark, so the benchmark
# finds kestrel-run and examples/hello next to itself.
cargo build --release --workspace --examples --bins

exec target/release/startup "$@"
