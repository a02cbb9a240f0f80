//! The byte forms a connection's members exchange among themselves: a root's outcome broadcast
//! to its group, and a group's list of transport card bundles. Owns these encodings (written
//! with the one codec, read back checked); it must never do I/O.

use kestrel_runtime::dpm::{DpmError, MpiClass};
use kestrel_transport::codec::{DecodeError, Reader, Writer};

use crate::engine::PmlError;

use super::dpm_err;

/// Encodes a root's outcome for its group: `[0]` + body, or `[1, class]` + the error's text
/// (see [`decode_outcome`]).
pub fn encode_outcome(r: &Result<Vec<u8>, PmlError>) -> Vec<u8> {
    match r {
        Ok(body) => {
            let mut v = vec![0u8];
            v.extend_from_slice(body);
            v
        }
        Err(e) => {
            let class = match e {
                PmlError::Dpm(d) => d.mpi_class(),
                _ => MpiClass::Other,
            };
            let mut v = vec![
                1u8,
                match class {
                    MpiClass::Port => 1,
                    MpiClass::Name => 2,
                    MpiClass::Service => 3,
                    MpiClass::Spawn => 4,
                    MpiClass::ProcFailed => 5,
                    MpiClass::Other => 6,
                },
            ];
            v.extend_from_slice(e.to_string().as_bytes());
            v
        }
    }
}

/// Decodes [`encode_outcome`]'s bytes; an error becomes `DpmError::Reported` with the root's
/// class and text.
pub fn decode_outcome(bytes: &[u8], root: u32) -> Result<Vec<u8>, PmlError> {
    match bytes.split_first() {
        Some((0, body)) => Ok(body.to_vec()),
        Some((1, rest)) if !rest.is_empty() => {
            let class = match rest[0] {
                1 => MpiClass::Port,
                2 => MpiClass::Name,
                3 => MpiClass::Service,
                4 => MpiClass::Spawn,
                5 => MpiClass::ProcFailed,
                _ => MpiClass::Other,
            };
            Err(dpm_err(DpmError::Reported {
                class,
                message: String::from_utf8_lossy(&rest[1..]).into_owned(),
            }))
        }
        _ => Err(dpm_err(DpmError::Protocol {
            peer: format!("root {root} of the local group"),
            what: "a malformed outcome broadcast".into(),
        })),
    }
}

/// The cards of a group's processes, in rank order: a count, then each process's bundle.
pub(super) fn encode_group_cards(cards: &[Vec<u8>]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(cards.len() as u32);
    for c in cards {
        w.bytes(c);
    }
    w.into_vec()
}

pub(super) fn decode_group_cards(body: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    let mut r = Reader::new(body, "group card list");
    let n = r.count("cards", 4)?;
    let cards = (0..n)
        .map(|_| r.bytes("card"))
        .collect::<Result<Vec<_>, _>>()?;
    r.finish("card list")?;
    Ok(cards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_and_outcomes_round_trip_and_garbage_is_refused() {
        for cards in [vec![], vec![vec![]], vec![b"bundle".to_vec(), vec![9; 300]]] {
            let enc = encode_group_cards(&cards);
            assert_eq!(decode_group_cards(&enc).unwrap(), cards);
            for end in 0..enc.len() {
                assert!(decode_group_cards(&enc[..end]).is_err());
            }
        }
        assert!(decode_group_cards(&[0, 0, 0, 9, 0]).is_err());
        let ok = encode_outcome(&Ok(vec![5, 6]));
        assert_eq!(decode_outcome(&ok, 0).unwrap(), vec![5, 6]);
        let err = encode_outcome(&Err(PmlError::Dpm(DpmError::Spawn("no".into()))));
        match decode_outcome(&err, 0) {
            Err(PmlError::Dpm(e)) => {
                assert_eq!(e.mpi_class(), MpiClass::Spawn);
                assert!(e.to_string().contains("spawn failed: no"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(decode_outcome(&[], 0).is_err());
        assert!(decode_outcome(&[7], 0).is_err());
    }
}
