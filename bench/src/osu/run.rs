//! What every benchmark program does around its measurement loop: page-aligned buffers,
//! parsing and reporting the command line on every rank, the start of a collective test, the
//! collectives' per-size statistics, and the orderly exit.
//!
//! It owns the communication a benchmark needs besides the measured one (reductions of the
//! statistics, the final barrier). It never times anything: the programs do.

use super::{
    column_header, help_text, parse, preamble, version_text, CollStats, Options, Parsed, Spec,
};

/// A page-aligned, zeroed byte buffer (OSU aligns its buffers to the page size).
pub struct AlignedBuf {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes starting at a 4096-byte boundary.
    pub fn new(len: usize) -> AlignedBuf {
        const ALIGN: usize = 4096;
        let storage = vec![0u8; len + ALIGN];
        let offset = storage.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf {
            storage,
            offset,
            len,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.offset..self.offset + self.len]
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }

    /// The bytes as C `char`s (`i8`, what `MPI_CHAR` is on the platforms Kestrel runs on).
    pub fn as_i8_slice(&self) -> &[i8] {
        let b = self.as_slice();
        // SAFETY: i8 has the size, alignment and (all bit patterns) validity of u8.
        unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<i8>(), b.len()) }
    }

    /// The bytes as C `char`s, mutably.
    pub fn as_mut_i8_slice(&mut self) -> &mut [i8] {
        let b = self.as_mut_slice();
        // SAFETY: as in `as_i8_slice`; the borrow of `self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<i8>(), b.len()) }
    }
}

/// Parses the command line for every rank and handles what stops the program: `-h`, `-v`
/// and bad options print on rank 0 only. Warnings go to rank 0's stderr. `Err` carries the
/// exit status (0 for help and version, 1 for a bad option).
pub fn parse_or_report(spec: &Spec, rank: i32, args: &[String]) -> Result<Options, i32> {
    let is_root = rank == 0;
    match parse(spec, args) {
        Parsed::Run(o) => {
            if is_root {
                for w in &o.warnings {
                    eprintln!("{w}");
                }
            }
            Ok(o)
        }
        Parsed::Help => {
            if is_root {
                print!("{}", help_text(spec, true));
            }
            Err(0)
        }
        Parsed::Version => {
            if is_root {
                print!("{}", version_text(spec));
            }
            Err(0)
        }
        Parsed::BadUsage(b) => {
            if is_root {
                eprint!("{b}\n\n");
                print!("{}", help_text(spec, false));
            }
            Err(1)
        }
    }
}

/// The start of a collective test on every rank: parses the options (as
/// [`parse_or_report`]), requires at least two ranks, applies `-M` for this number of ranks
/// (warning on rank 0's stderr) and prints the preamble and the column header on rank 0.
/// `Err` carries the exit status for [`exit`].
pub fn coll_begin(
    spec: &Spec,
    world: &kestrel::SimpleCommunicator,
    args: &[String],
) -> Result<Options, i32> {
    use kestrel::Communicator as _;
    let (rank, nprocs) = (world.rank(), world.size());
    let mut opts = parse_or_report(spec, rank, args)?;
    if nprocs < 2 {
        if rank == 0 {
            eprintln!("This test requires at least two processes");
        }
        return Err(1);
    }
    if let Some(w) = opts.limit_to_memory_ranks(spec, nprocs as usize) {
        if rank == 0 {
            eprintln!("{w}");
        }
    }
    if rank == 0 {
        print!("{}{}", preamble(spec, &opts, 1), column_header(spec, &opts));
    }
    Ok(opts)
}

/// OSU's per-size statistics of a collective, called by every rank with its mean latency in
/// microseconds: reductions to rank 0 of the minimum, the maximum and the sum (in OSU's
/// order). Rank 0 gets the minimum, the maximum and the sum divided by the ranks; the other
/// ranks get `None`.
pub fn coll_stats(world: &kestrel::SimpleCommunicator, latency_us: f64) -> Option<CollStats> {
    use kestrel::collective::{Root as _, SystemOperation};
    use kestrel::Communicator as _;
    let root = world.process_at_rank(0);
    let send = [latency_us];
    if world.rank() != 0 {
        root.reduce_into(&send[..], SystemOperation::min());
        root.reduce_into(&send[..], SystemOperation::max());
        root.reduce_into(&send[..], SystemOperation::sum());
        return None;
    }
    let (mut min, mut max, mut sum) = ([0.0f64], [0.0f64], [0.0f64]);
    root.reduce_into_root(&send[..], &mut min[..], SystemOperation::min());
    root.reduce_into_root(&send[..], &mut max[..], SystemOperation::max());
    root.reduce_into_root(&send[..], &mut sum[..], SystemOperation::sum());
    Some(CollStats {
        avg: sum[0] / f64::from(world.size()),
        min: min[0],
        max: max[0],
    })
}

/// Flushes stdout, waits for every rank (so that rank 0's report is out before a rank
/// exiting with an error makes the launcher stop the job), finalizes Kestrel (by dropping
/// the universe) and exits with `code`. Every rank must call it at the same point.
pub fn exit(universe: kestrel::Universe, code: i32) -> ! {
    use kestrel::Communicator as _;
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    universe.world().barrier();
    drop(universe);
    std::process::exit(code)
}
