//! `kestrel-run`: start a Kestrel (or any PMI) job. See `kestrel-run --help`.

fn main() {
    let code = kestrel_runtime::launcher::main(std::env::args().collect());
    std::process::exit(code);
}
