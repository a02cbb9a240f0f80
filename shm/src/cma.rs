//! Single copy between local processes with `process_vm_readv` (cross-memory attach).
//!
//! Permission depends on the peer (same user namespace, Yama `ptrace_scope`, container
//! capabilities), so it is probed once per peer: each process publishes the address of
//! [`PROBE`] and the probe reads it from the peer and compares the value.

use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;
use std::io::{IoSlice, IoSliceMut};

/// A word every Kestrel process has at a known address, read by peers to test access.
pub static PROBE: u64 = u64::from_le_bytes(*b"KSTRLCMA");

/// Address of this process's probe word.
pub fn probe_addr() -> u64 {
    &PROBE as *const u64 as u64
}

/// Whether this process may read `pid`'s memory (reads its probe word at `addr`).
pub fn probe(pid: u32, addr: u64) -> Result<(), nix::Error> {
    let mut word = [0u8; 8];
    read(pid, addr, &mut word)?;
    if u64::from_le_bytes(word) == PROBE {
        Ok(())
    } else {
        Err(nix::Error::EFAULT)
    }
}

/// Copies `dst.len()` bytes from address `addr` of process `pid`, looping on partial reads.
pub fn read(pid: u32, addr: u64, dst: &mut [u8]) -> Result<(), nix::Error> {
    let mut done = 0usize;
    while done < dst.len() {
        let remote = [RemoteIoVec {
            base: (addr as usize) + done,
            len: dst.len() - done,
        }];
        let mut local = [IoSliceMut::new(&mut dst[done..])];
        match process_vm_readv(Pid::from_raw(pid as i32), &mut local, &remote) {
            Ok(0) => return Err(nix::Error::EFAULT),
            Ok(n) => done += n,
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Copies `src` to address `addr` of process `pid`, looping on partial writes.
pub fn write(pid: u32, addr: u64, src: &[u8]) -> Result<(), nix::Error> {
    let mut done = 0usize;
    while done < src.len() {
        let remote = [RemoteIoVec {
            base: (addr as usize) + done,
            len: src.len() - done,
        }];
        let local = [IoSlice::new(&src[done..])];
        match process_vm_writev(Pid::from_raw(pid as i32), &local, &remote) {
            Ok(0) => return Err(nix::Error::EFAULT),
            Ok(n) => done += n,
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn reads_own_memory_and_probe() {
        let pid = std::process::id();
        super::probe(pid, super::probe_addr()).unwrap();
        let src: Vec<u8> = (0..100_000).map(|i| i as u8).collect();
        let mut dst = vec![0u8; 50_000];
        super::read(pid, src.as_ptr() as u64 + 1000, &mut dst).unwrap();
        assert_eq!(&dst[..], &src[1000..51_000]);
        assert!(super::read(pid, 8, &mut dst).is_err());
        let mut target = vec![0u8; 1000];
        super::write(pid, target.as_mut_ptr() as u64, &src[..1000]).unwrap();
        assert_eq!(&target[..], &src[..1000]);
    }
}
