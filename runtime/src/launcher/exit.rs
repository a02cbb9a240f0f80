//! Words for how a process ended, as operators read them in `kestrel-run`'s messages.

use super::proto::RankStatus;

/// The conventional description of a Linux signal number.
pub fn signal_description(sig: i32) -> &'static str {
    match sig {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        5 => "Trace/breakpoint trap",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        10 => "User defined signal 1",
        11 => "Segmentation fault",
        12 => "User defined signal 2",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        24 => "CPU time limit exceeded",
        25 => "File size limit exceeded",
        31 => "Bad system call",
        _ => "unknown signal",
    }
}

/// `exited with status 3` or `killed by signal 11 (Segmentation fault)`, with a hint for the
/// signals whose cause users most often miss.
pub fn describe_status(status: RankStatus) -> String {
    match status {
        RankStatus::Code(c) => format!("exited with status {c}"),
        RankStatus::Signal(s) => {
            let hint = match s {
                7 => "; in shared memory this usually means /dev/shm is full (enlarge it or set KESTREL_SHM_DIR)",
                9 => "; possibly the kernel's out-of-memory killer (see dmesg)",
                _ => "",
            };
            format!("killed by signal {s} ({}){hint}", signal_description(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions() {
        assert_eq!(
            describe_status(RankStatus::Signal(11)),
            "killed by signal 11 (Segmentation fault)"
        );
        assert_eq!(describe_status(RankStatus::Code(3)), "exited with status 3");
        assert!(describe_status(RankStatus::Signal(7)).contains("/dev/shm"));
        assert_eq!(signal_description(64), "unknown signal");
    }
}
