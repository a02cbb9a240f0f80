//! Kestrel's MPICH-ABI-compatible C library, `libmpich.so.12`.
//!
//! Programs built against MPICH (or Intel MPI, MVAPICH: the same binary interface) load
//! this library instead of MPICH's when it comes first on `LD_LIBRARY_PATH`, and programs
//! compiled with `abi/bin/mpicc` against `abi/include/mpi.h` link to it directly. Either
//! way they run on Kestrel's engine under `kestrel-run` (`abi/bin/mpiexec`).
//!
//! Layout, from the C boundary inwards:
//! * [`ffi`]: the exported `MPI_*`/`PMPI_*` functions. Each converts its C arguments
//!   (through [`mem`]) and runs a body under [`api::call`].
//! * [`api`]: running a call under the library lock (`kestrel_abi_lock::CallLock`, its own crate so that loom can check it), and error handlers;
//!   [`blocking`]: how a blocking call waits (letting other threads in under
//!   `MPI_THREAD_MULTIPLE`); [`progress_thread`]: the optional thread that advances
//!   operations while the program computes; [`comm_threads`] and [`turns`]: communicator
//!   creation from several threads at once.
//! * [`p2p`], [`requests`], [`complete`], [`coll`], [`comm`], [`dpm`], [`env`]: the calls' meaning,
//!   in safe Rust over [`mem::Region`]s and the engine.
//! * [`types`]: datatypes and packing; [`handle`]: MPICH's handle bits; [`error`]: error
//!   classes and codes; [`state`]: the tables behind the handles.
//! * [`tool`]: the tool information interface (MPI_T): Kestrel's parameters as control
//!   variables, its counters as performance variables, under a lock of its own.
//!
//! `unsafe` code is confined to [`ffi`] (C entry points), [`mem`] (C pointers to bounded
//! views), [`callbacks`] (calls into the program's C functions), [`requests`] (library
//! memory lent to the engine), [`plan`] (a schedule's staging buffers lent to the engine),
//! [`win`] (memory of `MPI_Win_allocate` windows) and one `Send` impl in
//! [`state`] (the state's lock lives in the `kestrel-abi-lock` crate); each block says why
//! it is sound.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod blocking;
pub mod callbacks;
pub mod coll;
pub mod comm;
pub mod comm_create;
pub mod comm_threads;
pub mod complete;
pub mod datatype_ext;
pub mod dpm;
pub mod env;
pub mod error;
#[allow(unsafe_code)]
pub mod ffi;
pub mod grequest;
pub mod handle;
pub mod icoll;
pub mod isendrecv;
pub mod mem;
pub mod p2p;
pub mod partitioned;
#[allow(unsafe_code)]
pub mod plan;
pub mod progress_thread;
pub mod requests;
pub mod session;
pub mod state;
pub mod tool;
pub mod topo;
pub mod turns;
pub mod type_attr;
pub mod types;
#[allow(unsafe_code)]
pub mod win;
#[allow(unsafe_code)]
pub mod win_rec;
