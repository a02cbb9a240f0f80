//! Gives the C library the soname MPICH-built programs look for, so that an unmodified
//! binary linked against MPICH's `libmpich.so.12` loads this one instead when it comes first
//! on `LD_LIBRARY_PATH`.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpich.so.12");
    println!("cargo:rerun-if-changed=build.rs");
}
