#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, checks formatting and lints, runs every
# unit and integration test (multi-process, MPICH interoperability, network-namespace hosts).
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/setup.sh
cargo build --release --workspace --lib --bins --examples
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --release --workspace

# The shared-memory queue and fast box under loom (every interleaving within the bound).
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
  cargo test -p kestrel-shm --release --test loom
