//! Crash signals that libraries behind libfabric take over.
//!
//! libfabric links the `psm` and `psm2` provider libraries (libinfinipath, libpsm2), and their
//! constructors, run when the process loads (before `main`), install SIGSEGV, SIGBUS, SIGILL
//! and SIGFPE handlers that print their own backtrace, write a `<prog>.<pid>,<host>.btr` file
//! into the working directory and exit with status 1. A rank's real crash then reaches the
//! launcher as "exited with status 1" instead of the signal. This module puts the default
//! action back for every such handler that lives in one of those libraries (found with
//! `dladdr`); a handler the program installed itself is left alone. It owns only that check;
//! it must never install a handler of its own.

use std::ffi::CStr;

/// The signals those libraries take.
const CRASH_SIGNALS: [libc::c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

/// Libraries whose crash handlers are put back to the default.
const FOREIGN_HANDLER_LIBS: [&str; 3] = ["libinfinipath", "libpsm_infinipath", "libpsm2"];

/// Restores the default action of every crash signal whose handler lives in a provider
/// library; returns the signals it restored.
pub fn restore_crash_signals() -> Vec<libc::c_int> {
    let mut restored = Vec::new();
    for sig in CRASH_SIGNALS {
        // SAFETY: `sigaction` with a null new action only reads the current one into `old`,
        // a zeroed struct of the right type.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            continue;
        }
        let handler = old.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            continue;
        }
        // SAFETY: dladdr only reads the loader's tables for the address and fills `info`, whose
        // `dli_fname` (when set) points at a NUL-terminated name the loader keeps alive.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        let found = unsafe { libc::dladdr(handler as *const libc::c_void, &mut info) } != 0;
        if !found || info.dli_fname.is_null() {
            continue;
        }
        // SAFETY: non-null and NUL-terminated, as above.
        let lib = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        let file = lib.rsplit('/').next().unwrap_or(&lib);
        if !FOREIGN_HANDLER_LIBS.iter().any(|l| file.starts_with(l)) {
            continue;
        }
        // SAFETY: a zeroed sigaction with SIG_DFL and an empty mask is a valid default action.
        let ok = unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut dfl.sa_mask);
            libc::sigaction(sig, &dfl, std::ptr::null_mut()) == 0
        };
        if ok {
            tracing::debug!(target: "fabric", signal = sig, library = %file, "crash handler of a provider library removed; default action restored");
            restored.push(sig);
        }
    }
    restored
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn ours(_: libc::c_int) {}

    #[test]
    fn a_handler_of_the_program_itself_is_left_alone() {
        // SAFETY: installs a handler defined above for SIGFPE in this test process and reads it
        // back; nothing raises SIGFPE here.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ours as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGFPE, &sa, std::ptr::null_mut()), 0);
        }
        let restored = restore_crash_signals();
        assert!(!restored.contains(&libc::SIGFPE));
        // SAFETY: reads the current action.
        let now = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGFPE, std::ptr::null(), &mut old);
            old.sa_sigaction
        };
        assert_eq!(now, ours as *const () as usize);
    }
}
