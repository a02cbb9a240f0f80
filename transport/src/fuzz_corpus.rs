//! The committed seed corpora of Kestrel's cargo-fuzz targets, as the owning crates' unit tests
//! use them.
//!
//! A fuzz target's checks live in the library that owns the decoder (a `fuzzing` module with
//! `fuzz_one` and `seed_corpus`), so that ordinary unit tests replay the target's corpus
//! (`fuzz/corpus/<target>/`, one file per seed, named by the seed) without cargo-fuzz. This
//! module owns those conventions: [`check_committed`] keeps the committed files equal to the
//! generator (`KESTREL_WRITE_FUZZ_CORPUS=1` rewrites them), [`replay`] runs every file through
//! `fuzz_one` and names the file that broke a property, and [`mutate_seeds`] is a small
//! deterministic fuzzer so each test run explores a little beyond the corpus. It must never know
//! a decoder, write outside the corpus directory it is given, or hold state between calls.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;

/// Set (to anything) to make [`check_committed`] rewrite the seed files from the generator.
pub const WRITE_ENV: &str = "KESTREL_WRITE_FUZZ_CORPUS";

/// Checks that `dir` holds exactly the bytes of every seed (file name = seed name), or writes
/// them first when [`WRITE_ENV`] is set. Files that are not seeds are left alone: inputs a
/// fuzzing run found may be copied in by hand, and [`replay`] runs them too. Panics naming the
/// first seed that is missing or differs, and on two seeds of one name.
pub fn check_committed(dir: &Path, seeds: &[(&str, Vec<u8>)]) {
    let write = std::env::var_os(WRITE_ENV).is_some();
    if write {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    }
    let mut names = std::collections::BTreeSet::new();
    for (name, bytes) in seeds {
        assert!(names.insert(*name), "two seeds are named {name}");
        assert!(
            !name.is_empty() && !name.contains('/'),
            "seed name {name:?} is not a plain file name"
        );
        let path = dir.join(name);
        if write {
            std::fs::write(&path, bytes)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "seed {} missing ({e}); regenerate with {WRITE_ENV}=1",
                path.display()
            )
        });
        assert!(
            committed == *bytes,
            "seed {} differs from the generator; regenerate with {WRITE_ENV}=1",
            path.display()
        );
    }
}

/// The two tests every fuzz target's module has: the committed corpus in `$dir` equals
/// `$seeds()` ([`check_committed`]) and every file of it replays through `$fuzz_one`
/// ([`replay`]). Expands to two `#[test]` functions in the calling test module.
#[macro_export]
macro_rules! seed_corpus_tests {
    ($dir:expr, $seeds:path, $fuzz_one:path) => {
        #[test]
        fn committed_seed_corpus_matches_the_generator() {
            $crate::fuzz_corpus::check_committed(&$dir, &$seeds());
        }

        #[test]
        fn corpus_replays_through_fuzz_one() {
            let n = $crate::fuzz_corpus::replay(&$dir, $fuzz_one);
            assert!(n >= $seeds().len());
        }
    };
}

/// Runs every file of `dir` through `fuzz_one` and returns how many there were. A panic (a
/// violated property) is re-raised after naming the file, so a failure says which input to
/// run the fuzz target on.
pub fn replay(dir: &Path, mut fuzz_one: impl FnMut(&[u8])) -> usize {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list the corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    paths.sort();
    for path in &paths {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| fuzz_one(&bytes))) {
            eprintln!("fuzz corpus: {} broke a property", path.display());
            resume_unwind(panic);
        }
    }
    paths.len()
}

/// A small deterministic generator (xorshift64*): the same seed gives the same mutants, so a
/// failing test run can be repeated.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is remapped, xorshift would stay at zero).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// One to four random edits of `seed`: bit flips, byte sets (mostly within the first `hot`
/// bytes, where formats keep their lengths and tags), boundary values, cuts, inserted
/// `tokens` (the format's separators and keywords), deleted and repeated ranges.
pub fn mutate(rng: &mut Rng, seed: &[u8], hot: usize, tokens: &[&[u8]]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let len = d.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                d[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len.min(hot.max(1)));
                d[i] = rng.next_u64() as u8;
            }
            2 if len > 0 => {
                let i = rng.below(len);
                d[i] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            3 => d.truncate(rng.below(len + 1)),
            4 if !tokens.is_empty() => {
                let at = rng.below(len + 1);
                let token = tokens[rng.below(tokens.len())];
                d.splice(at..at, token.iter().copied());
            }
            5 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(8)).min(len);
                d.drain(at..end);
            }
            6 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(16)).min(len);
                let copy: Vec<u8> = d[at..end].to_vec();
                let to = rng.below(len + 1);
                d.splice(to..to, copy);
            }
            _ => d.extend((0..rng.below(24)).map(|_| rng.next_u64() as u8)),
        }
    }
    d
}

/// Runs `rounds` mutants of the seeds (see [`mutate`]) through `fuzz_one`; a panic is
/// re-raised after printing the mutant, so a failure can be added to the seed corpus.
pub fn mutate_seeds(
    seeds: &[(&str, Vec<u8>)],
    rounds: usize,
    rng_seed: u64,
    hot: usize,
    tokens: &[&[u8]],
    mut fuzz_one: impl FnMut(&[u8]),
) {
    assert!(!seeds.is_empty(), "no seeds to mutate");
    let mut rng = Rng::new(rng_seed);
    for _ in 0..rounds {
        let (name, seed) = &seeds[rng.below(seeds.len())];
        let mutant = mutate(&mut rng, seed, hot, tokens);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| fuzz_one(&mutant))) {
            eprintln!("fuzz mutant of seed {name} broke a property: {mutant:?}");
            resume_unwind(panic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_are_deterministic_and_differ_from_their_seed() {
        let seed = b"cmd=put key=value\n".to_vec();
        let run = |s| {
            let mut rng = Rng::new(s);
            (0..200)
                .map(|_| mutate(&mut rng, &seed, 4, &[b"=", b"\n"]))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(7).iter().filter(|m| **m != seed).count() > 150);
    }

    #[test]
    fn the_committed_check_and_the_replay_name_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("kestrel-fuzz-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), b"one").unwrap();
        check_committed(&dir, &[("a", b"one".to_vec())]);
        let differs = catch_unwind(|| check_committed(&dir, &[("a", b"two".to_vec())]));
        assert!(differs.is_err(), "a differing seed passed");
        let missing = catch_unwind(|| check_committed(&dir, &[("b", Vec::new())]));
        assert!(missing.is_err(), "a missing seed passed");
        assert_eq!(replay(&dir, |b| assert_eq!(b, b"one")), 1);
        let broken = catch_unwind(|| replay(&dir, |b| assert_ne!(b, b"one")));
        assert!(broken.is_err(), "a broken property passed the replay");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
