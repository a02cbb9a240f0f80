//! Kestrel benchmarks: OSU-style binaries and the comparisons with Open MPI and MPICH.

pub mod osu;
