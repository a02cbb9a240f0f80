//! `kestrel-ifmatch`: shows how Kestrel's usnic transport pairs local and remote network
//! interfaces, and why. The logic lives in the `kestrel_ifmatch` library; this file only
//! connects it to the process's arguments, standard streams and exit code.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = kestrel_ifmatch::run(&args, &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}
