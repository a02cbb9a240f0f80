//! The card a rank publishes in the modex so that the local peers can map its segment, and its
//! checked decoding. Owns the card's encoding; it must never open or map a file.

use kestrel_transport::codec::{Reader, Writer};

/// What a rank publishes so local peers can find its segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmCard {
    /// The owner's local rank.
    pub local_rank: u32,
    /// Path of the segment file.
    pub path: String,
}

/// Version byte of [`ShmCard`]'s encoding.
const CARD_VERSION: u8 = 2;

impl ShmCard {
    /// Version, local rank, segment path (the project's one codec).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(CARD_VERSION).u32(self.local_rank).string(&self.path);
        w.into_vec()
    }

    /// Checked decoding of a peer's card.
    pub fn decode(bytes: &[u8]) -> Result<ShmCard, String> {
        let mut r = Reader::new(bytes, "shm card");
        let card = (|| {
            let version = r.u8("version")?;
            if version != CARD_VERSION {
                return Err(r.error(
                    "version",
                    "not this Kestrel's shm card (mixed Kestrel versions?)",
                ));
            }
            let local_rank = r.u32("local rank")?;
            let path = r.string("segment path")?;
            if !path.starts_with('/') || path.contains('\0') {
                return Err(r.error("segment path", "not an absolute path"));
            }
            Ok(ShmCard { local_rank, path })
        })();
        let card = card.map_err(|e| format!("shm: {e}"))?;
        r.finish("card").map_err(|e| format!("shm: {e}"))?;
        Ok(card)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_decode_strictly() {
        let c = ShmCard {
            local_rank: 2,
            path: "/dev/shm/kestrel.x.shm.5".into(),
        };
        let bytes = c.encode();
        assert_eq!(ShmCard::decode(&bytes).unwrap(), c);
        for cut in 0..bytes.len() {
            assert!(ShmCard::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut old = bytes.clone();
        old[0] = 1;
        assert!(ShmCard::decode(&old).unwrap_err().contains("version"));
        let relative = ShmCard {
            local_rank: 0,
            path: "relative".into(),
        };
        assert!(ShmCard::decode(&relative.encode())
            .unwrap_err()
            .contains("absolute"));
        let mut trailing = bytes;
        trailing.push(0);
        assert!(ShmCard::decode(&trailing).unwrap_err().contains("trailing"));
    }
}
