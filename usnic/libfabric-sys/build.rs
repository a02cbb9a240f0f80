//! Generates the libfabric bindings from the system headers and compiles C shims for the calls
//! libfabric defines as `static inline` (`fi_send`, `fi_cq_read`, `fi_endpoint`, ...), which
//! have no symbol in `libfabric.so` and so cannot be called from Rust directly.

use std::env;
use std::path::PathBuf;

/// Oldest libfabric whose API (mode bits, `mr_mode` bits, `fi_info` layout) the wrapper relies on.
const MIN_LIBFABRIC: &str = "1.11";

fn main() {
    if env::var_os("CARGO_FEATURE_LIBFABRIC").is_none() {
        // Built without the `libfabric` feature: no bindings, nothing to find or link.
        return;
    }
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    // Link flags are printed by hand below, after the shim library, so that the linker sees the
    // shims (which reference libfabric) before libfabric itself.
    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_LIBFABRIC)
        .cargo_metadata(false)
        .probe("libfabric")
    {
        Ok(lib) => lib,
        Err(e) => panic!(
            "kestrel-libfabric-sys: libfabric >= {MIN_LIBFABRIC} was not found through pkg-config \
             ({e}). Install the development package (`apt-get install libfabric-dev` on \
             Debian/Ubuntu, or run ci/setup.sh), or point PKG_CONFIG_PATH at the directory \
             holding libfabric.pc."
        ),
    };

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let header = manifest_dir.join("wrapper.h");
    let shim_base = out_dir.join("fabric_static_shims");

    let include_args = lib
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()));
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(include_args)
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*")
        .allowlist_var("FI_.*")
        // Deprecated in the headers (their shims would only produce compiler warnings).
        .blocklist_function("fi_(rx|tx)_size_left")
        .prepend_enum_name(false)
        .derive_default(true)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&shim_base)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "kestrel-libfabric-sys: bindgen could not process {} ({e}); it needs libclang \
                 (`apt-get install libclang-dev clang`)",
                header.display()
            )
        });
    bindings
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("kestrel-libfabric-sys: cannot write bindings.rs into OUT_DIR");

    cc::Build::new()
        .file(shim_base.with_extension("c"))
        .includes(&lib.include_paths)
        .include(&manifest_dir)
        .compile("kestrel_fabric_shims");

    for path in &lib.link_paths {
        println!("cargo:rustc-link-search=native={}", path.display());
    }
    for name in &lib.libs {
        println!("cargo:rustc-link-lib={name}");
    }
}
