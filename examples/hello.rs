//! Each rank says hello: `kestrel-run -n 4 target/release/examples/hello`.

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    println!(
        "Hello from rank {} of {} on {}",
        universe.rank(),
        universe.size(),
        universe.node_id()
    );
}
