//! NWChem as Debian builds it against MPICH (`nwchem-mpich`), run unmodified on Kestrel's
//! `libmpich.so.12`: a quantum chemistry code whose distributed arrays (Global Arrays over
//! ARMCI-MPI) live in MPI one-sided windows, accessed with passive-target locks, puts, gets
//! and accumulates, next to its own collectives and point-to-point. A water molecule in
//! 6-31G* through SCF, DFT (B3LYP), MP2 and CCSD must give the energies MPICH gives for the
//! same input (`REFERENCE`, from `mpiexec.mpich -n 2` and `-n 4` with
//! `ARMCI_USE_WIN_ALLOCATE=0`; they agree to 1e-12 hartree).
//!
//! ARMCI-MPI takes its windows from `MPI_Win_allocate` by default (`ARMCI_USE_WIN_ALLOCATE=1`:
//! on Kestrel, shared memory on one node), which Debian's README says to turn off on MPICH
//! (4 ranks there end with rc 255); with 0 they come from `MPI_Win_create` (on Kestrel, the
//! active-message path). Both run here. On this 2-core machine MPICH took 285 s for the 4-rank
//! run (its ranks do not yield when they outnumber the cores); Kestrel takes about 2 s.

use std::time::Duration;

use kestrel_tests::*;

/// The input: one molecule, four methods.
const INPUT: &str = r#"start h2o
title "water: scf, dft, mp2, ccsd"
geometry units angstrom
 O 0.0 0.0 0.0
 H 0.0 0.757 0.587
 H 0.0 -0.757 0.587
end
basis
 * library 6-31g*
end
dft
 xc b3lyp
end
task scf energy
task dft energy
task mp2 energy
task ccsd energy
"#;

/// (label in the output, MPICH's energy in hartree). The label's line ends with the value.
const REFERENCE: [(&str, f64); 4] = [
    ("Total SCF energy =", -76.010_496_172_412),
    ("Total DFT energy =", -76.408_738_452_879),
    ("Total MP2 energy:", -76.199_032_714_788_7),
    ("Total CCSD energy:", -76.207_828_235_432_1),
];

/// Agreement required with MPICH's energies. Runs differ by about 1e-11 (the DFT grid's
/// sums in another order); a wrong exchange is off by far more.
const TOLERANCE: f64 = 1e-8;

/// The first value printed after `label`.
fn energy(out: &str, label: &str) -> Option<f64> {
    let line = out.lines().find(|l| l.contains(label))?;
    line.rsplit(char::is_whitespace).next()?.parse().ok()
}

fn run_water(ranks: &str, win_allocate: &str) {
    let nwchem = tool("nwchem.mpich", "nwchem-mpich");
    let dir = scratch(&format!("nwchem-{ranks}-{win_allocate}"));
    std::fs::write(dir.join("h2o.nw"), INPUT).unwrap();
    let mut cmd = kestrel_run(&["--oversubscribe", "-n", ranks, "--timeout", "150", "env"]);
    cmd.arg(format!("LD_LIBRARY_PATH={}", libdir().display()))
        .arg(format!("ARMCI_USE_WIN_ALLOCATE={win_allocate}"))
        .arg(&nwchem)
        .arg("h2o.nw")
        .current_dir(&dir);
    let out = run(cmd, Duration::from_secs(180));
    let _ = std::fs::remove_dir_all(&dir);
    let what = format!("NWChem on {ranks} ranks, ARMCI_USE_WIN_ALLOCATE={win_allocate}");
    assert!(out.success(), "{what}: {}", out.show());
    for (label, want) in REFERENCE {
        let got = energy(&out.stdout, label)
            .unwrap_or_else(|| panic!("{what}: no '{label}' line: {}", out.show()));
        assert!(
            (got - want).abs() < TOLERANCE,
            "{what}: {label} {got}, MPICH gives {want}"
        );
    }
}

#[test]
fn nwchem_built_for_mpich_gives_mpichs_energies_on_kestrel() {
    run_water("2", "1");
    run_water("4", "1");
    run_water("3", "0");
}

#[test]
fn the_energy_parser_reads_both_line_formats() {
    let out = "         Total SCF energy =    -76.010496172412\n Total MP2 energy:            -76.199032714788700\n";
    assert_eq!(energy(out, "Total SCF energy ="), Some(-76.010496172412));
    assert_eq!(energy(out, "Total MP2 energy:"), Some(-76.1990327147887));
    assert_eq!(energy(out, "Total CCSD energy:"), None);
}
