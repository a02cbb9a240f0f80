#!/usr/bin/env bash
# Installs the Debian packages Kestrel's build, tests and demo need. Idempotent: installs only
# what is missing, so a prepared machine pays nothing.
set -euo pipefail

packages=(
  build-essential pkg-config      # C shims and pkg-config lookups of -sys crates
  libfabric-dev libhwloc-dev      # inter-node transport, NUMA placement
  clang libclang-dev              # bindgen for the libfabric bindings
  iproute2 nftables               # network-namespace test hosts, packet loss
  mpich libmpich-dev              # interoperability tests: hydra launcher, MPICH-built programs
  gfortran                        # Fortran tests: built with MPICH's mpif90, run on Kestrel
  python3-dev python3-venv python3-pip  # mpi4py built from its PyPI source in a venv (ci/mpi4py.sh)
  netpipe-mpich2                  # NPmpich2: an unmodified MPICH binary run on libmpich.so.12 (abi)
  scalapack-mpi-test              # ScaLAPACK's BLACS/PBLAS/driver testers built for MPICH, run on Kestrel (scalapack)
  libblas3 liblapack3             # the reference BLAS/LAPACK the scalapack test runs on, whatever BLAS is the system's
  libcoarrays-mpich-dev           # OpenCoarrays' test programs built for MPICH: Fortran coarrays over one-sided MPI (opencoarrays)
  nwchem-mpich                    # NWChem built for MPICH: Global Arrays over ARMCI-MPI windows (nwchem)
  bagel                           # BAGEL built for MPICH: MPI_THREAD_MULTIPLE, request-based one-sided windows (bagel)
  procps                          # ps/pgrep in scripts
  slurm-wlm munge                 # one-node Slurm cluster for the srun/salloc tests (ci/slurm-cluster)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ci/setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "ci/setup.sh: cargo is not on PATH; install Rust (https://rustup.rs) first" >&2
  exit 1
fi
