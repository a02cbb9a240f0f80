//! The start of every one-sided test ([`rma_begin`]): options, rank count, warnings, a bad
//! `-w`/`-s`/`-T`, the refusal of what the Rust API cannot do and `-M`, reported in
//! `osu_rma.h`'s order.

use kestrel::{Communicator as _, SimpleCommunicator};

use super::{rma_help_text, rma_parse, rma_version_text, RmaOptions, RmaParsed, RmaSpec};
use crate::osu::BadUsage;

/// The start of a one-sided test on every rank, in `osu_rma.h`'s order: parses the options
/// (`-h`, `-v` and a bad OSU option print on rank 0 and stop), requires exactly two ranks,
/// prints the options' warnings, reports a bad `-w`/`-s`/`-T`, refuses what the Rust API
/// cannot do ([`RmaOptions::unsupported`]) and applies `-M`. `Err` carries the exit status for
/// [`exit`](crate::osu::exit).
pub fn rma_begin(
    spec: &RmaSpec,
    world: &SimpleCommunicator,
    args: &[String],
) -> Result<RmaOptions, i32> {
    let (rank, nprocs) = (world.rank(), world.size());
    let root = rank == 0;
    let report = |b: &BadUsage| {
        if root {
            eprint!("{b}\n\n");
            print!("{}", rma_help_text(spec));
        }
    };
    let (o, bad) = match rma_parse(spec, args) {
        RmaParsed::Help => {
            if root {
                print!("{}", rma_help_text(spec));
            }
            return Err(0);
        }
        RmaParsed::Version => {
            if root {
                print!("{}", rma_version_text(spec));
            }
            return Err(0);
        }
        RmaParsed::BadUsage(b) => {
            report(&b);
            return Err(1);
        }
        RmaParsed::Run(o) => (Some(o), None),
        RmaParsed::BadRmaOption { bad, warnings } => (None, Some((bad, warnings))),
    };
    if nprocs != 2 {
        if root {
            eprintln!("This test requires exactly two processes");
        }
        return Err(1);
    }
    let warnings = match (&o, &bad) {
        (Some(o), _) => &o.opts.warnings,
        (None, Some((_, w))) => w,
        (None, None) => unreachable!("either options or a bad one"),
    };
    if root {
        for w in warnings {
            eprintln!("{w}");
        }
    }
    let Some(mut o) = o else {
        if let Some((b, _)) = &bad {
            report(b);
        }
        return Err(1);
    };
    if let Some(why) = o.unsupported(spec) {
        if root {
            eprintln!("{why}");
        }
        return Err(1);
    }
    if let Some(w) = o.limit_to_memory(spec) {
        if root {
            eprintln!("{w}");
        }
    }
    Ok(o)
}
