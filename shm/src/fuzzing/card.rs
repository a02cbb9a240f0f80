//! The `shm_card` fuzz target: the card a local peer publishes in the modex so that the others
//! can map its segment ([`ShmCard`]).
//!
//! An input is the bytes of a card. Checked: decoding never panics; an error names the shm
//! transport; a card that decodes names an absolute path without NUL bytes and re-encodes to
//! exactly the same bytes, and its strict prefixes and the same bytes with one more are refused.

use crate::btl::ShmCard;

/// The target's name (its corpus is `fuzz/corpus/shm_card`).
pub const TARGET: &str = "shm_card";

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let card = match ShmCard::decode(data) {
        Ok(card) => card,
        Err(e) => {
            assert!(
                e.starts_with("shm: "),
                "an error that does not name shm: {e}"
            );
            return;
        }
    };
    assert!(card.path.starts_with('/') && !card.path.contains('\0'));
    assert_eq!(card.encode(), data, "a decoded card re-encodes differently");
    for cut in [0, data.len() / 2, data.len() - 1] {
        assert!(ShmCard::decode(&data[..cut]).is_err(), "cut to {cut} bytes");
    }
    let mut longer = data.to_vec();
    longer.push(0);
    assert!(ShmCard::decode(&longer).is_err(), "a trailing byte passed");
}

/// The seed corpus: cards as the transport writes them and the typical ways one is wrong, by
/// file name.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let card = |local_rank, path: &str| {
        ShmCard {
            local_rank,
            path: path.to_string(),
        }
        .encode()
    };
    let good = card(2, "/dev/shm/kestrel.abc123.shm.2");
    let mut old_version = good.clone();
    old_version[0] = 1;
    let mut trailing = good.clone();
    trailing.push(0);
    let mut lying_length = good.clone();
    lying_length[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut not_utf8 = card(0, "/dev/shm/x");
    let last = not_utf8.len() - 1;
    not_utf8[last] = 0xff;
    vec![
        ("segment_in_dev_shm", good.clone()),
        ("largest_rank_root_path", card(u32::MAX, "/")),
        ("relative_path", card(0, "dev/shm/kestrel.x")),
        ("empty_path", card(0, "")),
        ("path_with_nul", card(0, "/dev/shm/a\0b")),
        ("old_version", old_version),
        ("truncated", good[..good.len() - 1].to_vec()),
        ("trailing_byte", trailing),
        ("length_past_the_end", lying_length),
        ("path_not_utf8", not_utf8),
        ("empty", vec![]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_decode_or_fail_as_named() {
        let valid = ["segment_in_dev_shm", "largest_rank_root_path"];
        for (name, bytes) in seed_corpus() {
            let result = ShmCard::decode(&bytes);
            assert_eq!(result.is_ok(), valid.contains(&name), "{name}: {result:?}");
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[b"/", b"\0", &[2], &[0, 0, 0, 0]];
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0x5CA2, 9, tokens, fuzz_one);
    }
}
