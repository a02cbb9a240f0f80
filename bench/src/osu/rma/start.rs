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

/// The whole program of a one-sided test: initialise, [`rma_begin`], then per element type
/// (`-T`; the byte tests have one) the header and the timed sizes, as `spec` says
/// (bandwidth, single-element atomics, or latency per size), then finalise and exit.
pub fn rma_main(spec: &RmaSpec) -> ! {
    use super::{rma_atomic_latency, rma_bandwidth_sizes, rma_header, rma_latency_sizes};
    use super::{RmaOp, RmaType};
    use crate::osu::Subtype;
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match rma_begin(spec, &world, &args) {
        Ok(o) => o,
        Err(code) => crate::osu::exit(universe, code),
    };
    let header = |ty: Option<RmaType>| {
        if world.rank() == 0 {
            print!("{}", rma_header(spec, &opts, ty));
        }
    };
    match (spec.subtype, spec.op) {
        (Subtype::Bw, _) => {
            header(Some(RmaType::Char));
            rma_bandwidth_sizes(&world, spec, &opts);
        }
        (_, RmaOp::Put | RmaOp::Get) => {
            header(Some(RmaType::Char));
            rma_latency_sizes::<u8>(&world, spec, &opts);
        }
        (_, RmaOp::GetAccumulate) => {
            header(None);
            rma_latency_sizes::<i8>(&world, spec, &opts);
        }
        (_, op) => {
            let atomic = matches!(op, RmaOp::FetchAndOp | RmaOp::CompareAndSwap);
            for &ty in &opts.types {
                header(Some(ty));
                // The parser admits only `spec.types` (osu_cas_latency: no float).
                match (ty, atomic) {
                    (RmaType::Char, true) => rma_atomic_latency::<i8>(&world, spec, &opts),
                    (RmaType::Int, true) => rma_atomic_latency::<i32>(&world, spec, &opts),
                    (RmaType::Float, true) => rma_atomic_latency::<f32>(&world, spec, &opts),
                    (RmaType::LongLong, true) => rma_atomic_latency::<i64>(&world, spec, &opts),
                    (RmaType::Char, false) => rma_latency_sizes::<i8>(&world, spec, &opts),
                    (RmaType::Int, false) => rma_latency_sizes::<i32>(&world, spec, &opts),
                    (RmaType::Float, false) => rma_latency_sizes::<f32>(&world, spec, &opts),
                    (RmaType::LongLong, false) => rma_latency_sizes::<i64>(&world, spec, &opts),
                }
            }
        }
    }
    crate::osu::exit(universe, 0)
}
