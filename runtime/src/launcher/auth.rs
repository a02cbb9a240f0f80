//! How the launcher and its remote daemons prove to each other that they belong to one job,
//! without the job's secret appearing on a command line, in an environment or on the wire.
//!
//! The head draws a 256-bit secret from the kernel's random source for each job and writes
//! it, as one line, to the standard input of each daemon's launch agent (`ssh`, `ip netns
//! exec`, `srun` forward it to the daemon; `ps` and `/proc/PID/cmdline` never show it). On
//! each daemon connection the head sends a fresh nonce; the daemon answers with an
//! HMAC-SHA256 of it under the secret (with its role and host index, so a proof for one host
//! or direction cannot be replayed for another) and its own nonce, which the head answers the
//! same way. Neither side trusts another frame before the proof it expects.
//!
//! This module owns the secret, its line format and the proofs. It never touches a socket and
//! never prints the secret (its `Debug` hides it).

use std::io::Read;

use crate::mac;

/// Bytes of the job secret.
pub const SECRET_LEN: usize = 32;
/// Bytes of a challenge nonce.
pub const NONCE_LEN: usize = mac::NONCE_LEN;
/// The label before the hex secret on the daemon's standard input.
const LINE_LABEL: &str = "kestrel-job-secret ";
/// The longest line a daemon reads (label, hex, newline, and some slack).
const MAX_LINE: usize = 160;

/// Who is proving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A daemon, answering the head's challenge.
    Daemon,
    /// The head, answering a daemon's challenge.
    Head,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Daemon => b"kestrel-launch-v1 daemon",
            Role::Head => b"kestrel-launch-v1 head",
        }
    }
}

/// A fresh challenge.
pub fn nonce() -> Result<Vec<u8>, String> {
    mac::nonce().map_err(|e| format!("kestrel-run: {e}"))
}

/// A job's shared secret.
#[derive(Clone)]
pub struct JobSecret([u8; SECRET_LEN]);

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSecret(hidden)")
    }
}

impl JobSecret {
    /// A new random secret.
    pub fn generate() -> Result<Self, String> {
        let mut s = [0u8; SECRET_LEN];
        mac::random_bytes(&mut s).map_err(|e| format!("kestrel-run: the job's secret: {e}"))?;
        Ok(JobSecret(s))
    }

    /// The line the head writes to a daemon's standard input.
    pub fn line(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{LINE_LABEL}{hex}\n")
    }

    /// Reads the secret line from `input` (a daemon's standard input): at most
    /// [`MAX_LINE`] bytes, up to the first newline.
    pub fn read_line(input: &mut impl Read) -> Result<Self, String> {
        let mut line = Vec::with_capacity(MAX_LINE);
        let mut byte = [0u8; 1];
        loop {
            match input.read(&mut byte) {
                Ok(0) => break,
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) if line.len() >= MAX_LINE => {
                    return Err("the job-secret line on standard input is too long".into())
                }
                Ok(_) => line.push(byte[0]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(format!(
                        "cannot read the job secret from standard input: {e}"
                    ))
                }
            }
        }
        let text = std::str::from_utf8(&line).map_err(|_| "the job-secret line is not text")?;
        let hex = text.strip_prefix(LINE_LABEL).ok_or(
            "standard input does not start with the job-secret line (a daemon is started by \
             kestrel-run, which writes it)",
        )?;
        if hex.len() != 2 * SECRET_LEN {
            return Err(format!(
                "the job secret has {} hex digits where {} are expected",
                hex.len(),
                2 * SECRET_LEN
            ));
        }
        let mut s = [0u8; SECRET_LEN];
        for (i, b) in s.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| "the job secret is not hexadecimal")?;
        }
        Ok(JobSecret(s))
    }

    /// `role`'s proof of the secret for host `host_index` over the other side's `nonce`.
    pub fn proof(&self, role: Role, host_index: u32, nonce: &[u8]) -> Vec<u8> {
        mac::proof(&self.0, role.label(), &[&host_index.to_be_bytes(), nonce])
    }

    /// Whether `proof` is `role`'s proof for `host_index` over `nonce` (compared in
    /// constant time). A nonce of the wrong length never verifies.
    pub fn verify(&self, role: Role, host_index: u32, nonce: &[u8], proof: &[u8]) -> bool {
        nonce.len() == NONCE_LEN
            && mac::verify(
                &self.0,
                role.label(),
                &[&host_index.to_be_bytes(), nonce],
                proof,
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_line_round_trips_and_hides_in_debug() {
        let s = JobSecret::generate().unwrap();
        let line = s.line();
        assert!(line.starts_with(LINE_LABEL) && line.ends_with('\n'));
        let mut input = line.as_bytes();
        let back = JobSecret::read_line(&mut input).unwrap();
        assert_eq!(back.0, s.0);
        assert!(!format!("{s:?}").contains(&line[LINE_LABEL.len()..LINE_LABEL.len() + 8]));
    }

    #[test]
    fn bad_lines_are_refused_without_reading_past_the_bound() {
        for bad in [
            "",
            "kestrel-job-secret 12\n",
            "something else\n",
            &format!("{LINE_LABEL}{}\n", "zz".repeat(SECRET_LEN)),
        ] {
            assert!(
                JobSecret::read_line(&mut bad.as_bytes()).is_err(),
                "{bad:?}"
            );
        }
        let endless = vec![b'a'; 10_000];
        let mut input = &endless[..];
        assert!(JobSecret::read_line(&mut input).is_err());
        assert!(
            input.len() >= 10_000 - MAX_LINE - 1,
            "read past the line bound"
        );
    }

    #[test]
    fn proofs_bind_the_secret_the_role_the_host_and_the_nonce() {
        let s = JobSecret::generate().unwrap();
        let other = JobSecret::generate().unwrap();
        let n = nonce().unwrap();
        let p = s.proof(Role::Daemon, 1, &n);
        assert!(s.verify(Role::Daemon, 1, &n, &p));
        assert!(
            !other.verify(Role::Daemon, 1, &n, &p),
            "another job's secret"
        );
        assert!(
            !s.verify(Role::Head, 1, &n, &p),
            "a daemon's proof replayed as the head's"
        );
        assert!(!s.verify(Role::Daemon, 2, &n, &p), "another host index");
        let n2 = nonce().unwrap();
        assert!(!s.verify(Role::Daemon, 1, &n2, &p), "another challenge");
        assert!(!s.verify(Role::Daemon, 1, &n[..8], &s.proof(Role::Daemon, 1, &n[..8])));
        assert!(!s.verify(Role::Daemon, 1, &n, &p[..31]));
    }
}
