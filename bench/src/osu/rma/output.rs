//! The one-sided tests' texts: the usage ([`rma_help_text`], byte for byte `osu_rma.h`'s
//! `help()`), the title line (`-v`) and OSU's `print_header_one_sided` ([`rma_header`]).

use std::fmt::Write as _;

use super::{RmaOptions, RmaSpec, RmaType};
use crate::osu::options::option_defs;
use crate::osu::{Subtype, FIELD_WIDTH, OMB_VERSION};

/// The usage text, byte for byte `osu_rma.h`'s `help()`.
pub fn rma_help_text(spec: &RmaSpec) -> String {
    let pad = "";
    let mut s = if spec.own_usage {
        format!(
            "Usage: ./{} -w <win_option>  -s < sync_option> [-x ITER] [-i ITER]\n",
            spec.name
        )
    } else {
        format!("Usage: {} [options]\nOptions:\n", spec.name)
    };
    s.push_str(
        "  -w, --win-options         WIN_OPTION - Supports MPI>=3. Can be any of the follows:\n",
    );
    for (arg, call) in [
        ("create  ", "MPI_Win_create"),
        ("allocate", "MPI_Win_allocate"),
        ("dynamic ", "MPI_Win_create_dynamic"),
    ] {
        let _ = writeln!(
            s,
            "{pad:28}{arg}     use {call} to create an MPI Window object"
        );
    }
    let _ = writeln!(s, "{pad:28}(default {})", spec.win_default.arg());
    s.push_str("  -s, --sync-option         SYNC_OPTION - can be any of the follows:\n");
    let _ = writeln!(
        s,
        "{pad:28}pscw          use Post/Start/Complete/Wait synchronization calls"
    );
    let _ = writeln!(
        s,
        "{pad:28}fence         use MPI_Win_fence synchronization call"
    );
    if !spec.active_only {
        let _ = writeln!(
            s,
            "{pad:28}lock          use MPI_Win_lock/unlock synchronizations calls"
        );
        let _ = writeln!(
            s,
            "{pad:28}flush         use MPI_Win_flush synchronization call"
        );
        let _ = writeln!(
            s,
            "{pad:28}flush_local   use MPI_Win_flush_local synchronization call"
        );
        let _ = writeln!(
            s,
            "{pad:28}lock_all      use MPI_Win_lock_all/unlock_all synchronization calls"
        );
    }
    let _ = writeln!(s, "{pad:28}(default {})", spec.sync_default.arg());
    // -h -v -m -x -i (-W), then -T, then -M: the order of osu_rma.h's help.
    let defs = option_defs(&spec.base());
    let line = |s: &mut String, short: char| {
        if let Some(d) = defs.iter().find(|d| d.short == short) {
            let _ = writeln!(s, "  -{}, --{:<20}{}", d.short, d.long, d.help[0]);
            for l in &d.help[1..] {
                let _ = writeln!(s, "{pad:28}{l}");
            }
        }
    };
    for short in ['h', 'v', 'm', 'x', 'i', 'W'] {
        line(&mut s, short);
    }
    if spec.takes_types() {
        let names: Vec<&str> = ["all"]
            .into_iter()
            .chain(spec.types.iter().map(|t| match t {
                RmaType::Char => "mpi_char",
                RmaType::Int => "mpi_int",
                RmaType::Float => "mpi_float",
                RmaType::LongLong => "mpi_long_long",
            }))
            .collect();
        let _ = writeln!(
            s,
            "  -T, --type                [{}] - Set MPI_TYPE . Default:MPI_CHAR.",
            names.join(",")
        );
        let _ = writeln!(
            s,
            "{pad:28}(also mpi_long_long: the 8-byte operation of OSU before 7.x)"
        );
    }
    line(&mut s, 'M');
    s
}

/// The title line (also what `-v` prints).
pub fn rma_version_text(spec: &RmaSpec) -> String {
    format!("# {} v{}\n", spec.title, OMB_VERSION)
}

/// OSU's `print_header_one_sided`: title, window creation, synchronization, the datatype
/// (`None`: no line, as osu_get_acc_latency) and the column header.
pub fn rma_header(spec: &RmaSpec, o: &RmaOptions, datatype: Option<RmaType>) -> String {
    let mut s = rma_version_text(spec);
    let _ = writeln!(s, "# Window creation: {}", o.win.mpi_name());
    let _ = writeln!(s, "# Synchronization: {}", o.sync.mpi_name());
    if let Some(t) = datatype {
        let _ = writeln!(s, "# Datatype: {}.", t.mpi_name());
    }
    let column = match spec.subtype {
        Subtype::Lat => "Latency (us)",
        Subtype::Bw => "Bandwidth (MB/s)",
    };
    let _ = writeln!(s, "{:<10}{column:>FIELD_WIDTH$}", "# Size");
    s
}
