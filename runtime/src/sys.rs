//! The runtime's only `unsafe` code: adopting an inherited file descriptor and the
//! async-signal-safe steps that run in a forked child before `exec`.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Takes ownership of the inherited descriptor `fd` after checking that it is an open socket.
/// Must be called at most once per descriptor number; the PMI client calls it once at start-up.
pub fn adopt_inherited_socket(fd: RawFd) -> Result<OwnedFd, String> {
    let stat =
        nix::sys::stat::fstat(fd).map_err(|e| format!("descriptor {fd} is not open ({e})"))?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(format!("descriptor {fd} is open but is not a socket"));
    }
    // SAFETY: fstat succeeded, so `fd` is an open descriptor of this process; it was inherited
    // from the launcher for our exclusive use (PMI_FD), nothing else in the process owns it, and
    // the caller adopts it only once, so the OwnedFd is its single owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a rank's child process must do between `fork` and `exec`.
#[derive(Debug, Clone, Default)]
pub struct ChildSetup {
    /// A descriptor created close-on-exec that the child must keep across `exec` (PMI_FD).
    pub keep_fd: Option<RawFd>,
    /// CPUs to bind to; empty = no binding.
    pub cpus: Vec<usize>,
}

/// Registers [`ChildSetup`] to run in the child after `fork`, before `exec`.
pub fn apply_child_setup(cmd: &mut tokio::process::Command, setup: ChildSetup) {
    let mut cpu_set = nix::sched::CpuSet::new();
    let mut bind = false;
    for &cpu in &setup.cpus {
        if cpu_set.set(cpu).is_ok() {
            bind = true;
        }
    }
    let keep_fd = setup.keep_fd;
    let parent = nix::unistd::getpid().as_raw();
    let hook = move || -> std::io::Result<()> {
        if let Some(fd) = keep_fd {
            // Clearing FD_CLOEXEC on our own copy keeps the socket open in the exec'd program
            // while every other rank's socket (still close-on-exec) disappears.
            // SAFETY: fcntl(F_SETFD) is async-signal-safe and `fd` is open in the child
            // because the parent holds it open until after spawn returns.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if bind {
            // Binding failure is not fatal for the rank: it only loses placement.
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpu_set);
        }
        // A rank must not outlive its agent: if kestrel-run is killed outright, nothing else
        // would ever stop the rank. (The agent forks from its only runtime thread, so "parent
        // thread exits" means "agent exits".)
        // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid are async-signal-safe and take plain
        // integer arguments.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == 0
                && libc::getppid() != parent
            {
                // The agent died between fork and prctl: the signal will never come.
                libc::_exit(137);
            }
        }
        Ok(())
    };
    // SAFETY: the hook only performs async-signal-safe system calls (fcntl, sched_setaffinity,
    // prctl, getppid, _exit) on values computed before fork; it allocates nothing and takes no
    // locks.
    unsafe {
        cmd.pre_exec(hook);
    }
}
