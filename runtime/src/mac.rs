//! Keyed proofs: how two processes show each other that they know a shared secret (a job's
//! launch secret, a DPM port's token) without sending it. A proof is HMAC-SHA256 under the
//! secret of a label (what is being proved, by whom) and the parts it binds (a host index or
//! port tag, and always the other side's fresh nonce, so that no proof can be replayed).
//!
//! This module owns the primitive, nonces and the kernel's random source; protocols
//! ([`crate::launcher::auth`], [`crate::dpm`]) choose labels and parts. It never logs secrets.

use std::io::Read;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of a proof.
pub const PROOF_LEN: usize = 32;

/// Fills `buf` from the kernel's random source; an error, never a weaker fallback.
pub fn random_bytes(buf: &mut [u8]) -> Result<(), String> {
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| {
            format!("cannot read /dev/urandom for a secret or nonce: {e}; Kestrel needs the kernel's random source")
        })
}

/// A fresh nonce.
pub fn nonce() -> Result<Vec<u8>, String> {
    let mut n = vec![0u8; NONCE_LEN];
    random_bytes(&mut n)?;
    Ok(n)
}

fn mac(key: &[u8], label: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    m.update(label);
    for p in parts {
        // Length-prefixed, so that no two different part lists hash alike.
        m.update(&(p.len() as u32).to_be_bytes());
        m.update(p);
    }
    m
}

/// The proof of `key` for `label` over `parts`.
pub fn proof(key: &[u8], label: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    mac(key, label, parts).finalize().into_bytes().to_vec()
}

/// Whether `proof` is the proof of `key` for `label` over `parts` (constant-time compare).
pub fn verify(key: &[u8], label: &[u8], parts: &[&[u8]], proof: &[u8]) -> bool {
    mac(key, label, parts).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2() {
        // Key "Jefe", data "what do ya want for nothing?" (no parts: the label is the data).
        let p = proof(b"Jefe", b"what do ya want for nothing?", &[]);
        let hex: String = p.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn proofs_bind_key_label_and_every_part() {
        let n = nonce().unwrap();
        let p = proof(b"k", b"label", &[b"1", &n]);
        assert!(verify(b"k", b"label", &[b"1", &n], &p));
        assert!(!verify(b"K", b"label", &[b"1", &n], &p));
        assert!(!verify(b"k", b"other", &[b"1", &n], &p));
        assert!(!verify(b"k", b"label", &[b"2", &n], &p));
        assert!(!verify(b"k", b"label", &[b"1", &n[1..]], &p));
        assert!(!verify(b"k", b"label", &[b"1", &n], &p[..31]));
        // Moving a byte between parts changes the proof.
        assert_ne!(
            proof(b"k", b"l", &[b"ab", b"c"]),
            proof(b"k", b"l", &[b"a", b"bc"])
        );
    }
}
