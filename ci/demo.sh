#!/usr/bin/env bash
# Kestrel's main demo: builds, then runs a job on local ranks and prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/setup.sh
cargo build --release --workspace --examples --bins

# Four ranks on any machine: more ranks than cores must be asked for (--oversubscribe).
echo "== kestrel-run --oversubscribe -n 4 hello"
target/release/kestrel-run --oversubscribe -n 4 target/release/examples/hello
echo
echo "== kestrel-run -n 2 demo"
target/release/kestrel-run -n 2 target/release/examples/demo
