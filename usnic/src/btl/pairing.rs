//! Pairing agreement: at first contact each path carries a HELLO with this side's interface
//! pairing; when the two sides' pairings differ (asymmetric route metrics) the lower (job,
//! rank) side's wins, and the other side adopts it, opening the paths it lacks and retiring
//! the others (their unacknowledged messages move to the remaining paths).
//!
//! This module owns the HELLO and adoption. It must never compute a pairing itself (that is
//! [`crate::matching`]) nor judge a path's health.

use std::time::Instant;

use super::{Path, PathState, Peer, UsnicBtl, AM_HELLO};
use crate::card::{HostCard, ModexCard};
use crate::matching::{Pairing, ProcessCard};

impl UsnicBtl {
    pub(super) fn first_contact(&mut self, peer: u32, now: Instant) {
        let p = self.peers[peer as usize].as_mut().expect("active peer");
        if p.contacted {
            return;
        }
        p.contacted = true;
        // The HELLO carries my pairing; the peer checks it against its own.
        let mut hello = Vec::with_capacity(1 + 2 * p.pairing.len());
        hello.push(p.pairing.len() as u8);
        for &(l, r) in &p.pairing {
            hello.extend_from_slice(&[l, r]);
        }
        for path in p.paths.iter_mut() {
            let id = p.next_msg_id;
            p.next_msg_id += 1;
            let _ = path.conn.send(AM_HELLO, &[&id.to_le_bytes(), &hello]);
            if let PathState::Probing { next_probe, .. } = &mut path.state {
                *next_probe = now;
            }
        }
    }

    /// Replaces our pairing with a lower-ranked peer's: paths it lacks are opened, paths it
    /// does not have are retired and their unacknowledged messages move to the others.
    pub(super) fn adopt_pairings(&mut self, now: Instant) {
        for (peer, theirs) in std::mem::take(&mut self.adoptions) {
            let Some(card) = self.peers[peer as usize].as_ref().map(|p| p.card.clone()) else {
                continue;
            };
            for &(rail, remote_if) in &theirs {
                let exists = self.peers[peer as usize].as_ref().is_some_and(|p| {
                    p.paths
                        .iter()
                        .any(|x| x.rail == rail as usize && x.remote_if == remote_if)
                });
                if exists || rail as usize >= self.rails.len() {
                    continue;
                }
                match self.open_path(peer, &card, rail as usize, remote_if, now) {
                    Ok(path) => self.peers[peer as usize]
                        .as_mut()
                        .expect("known peer")
                        .paths
                        .push(path),
                    Err(e) => {
                        tracing::warn!(target: "usnic", "cannot adopt rank {peer}'s pairing: {e}")
                    }
                }
            }
            let p = self.peers[peer as usize].as_mut().expect("known peer");
            let mut orphaned = Vec::new();
            for path in p.paths.iter_mut() {
                if !theirs.contains(&(path.rail as u8, path.remote_if)) && path.usable() {
                    path.state = PathState::Dead(format!("replaced by rank {peer}'s pairing"));
                    orphaned.extend(path.conn.take_unacknowledged());
                }
            }
            p.pairing = theirs;
            if !orphaned.is_empty() {
                self.rehome.push((peer, orphaned));
            }
        }
        self.rehome_orphans();
    }
}

/// Checks a peer's HELLO (its pairing) against ours. Returns the peer's pairing, mirrored into
/// our terms, when it differs and the peer's choice wins (the lower (job, rank) decides).
pub(super) fn on_hello(job: &str, me: u32, p: &mut Peer, body: &[u8]) -> Option<Vec<(u8, u8)>> {
    if p.hello_seen {
        return None;
    }
    p.hello_seen = true;
    let (&n, rest) = body.split_first()?;
    if rest.len() != 2 * n as usize {
        return None;
    }
    // Their (their rail, my interface) pairs, mirrored into my terms.
    let mut theirs: Vec<(u8, u8)> = rest.chunks(2).map(|c| (c[1], c[0])).collect();
    theirs.sort_unstable();
    let mut mine = p.pairing.clone();
    mine.sort_unstable();
    if theirs == mine {
        return None;
    }
    let lower_is_me = (job, me) < (job, p.rank);
    tracing::warn!(
        target: "usnic",
        "rank {me} and rank {} chose different interface pairs: mine {:?}, theirs {:?} (local rail, remote interface); \
         the lower rank's choice ({}) is used -- `kestrel-ifmatch explain` on both cards shows why (usually asymmetric route metrics)",
        p.rank,
        mine,
        theirs,
        if lower_is_me { "mine" } else { "theirs" }
    );
    (!lower_is_me).then_some(theirs)
}

pub(super) fn describe_pairs(mine: &ModexCard, theirs: &ModexCard, paths: &[Path]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(
                "{}->{}",
                mine.interfaces()[p.rail].interface.name,
                theirs.interfaces()[p.remote_if as usize].interface.name
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn no_pair_message(
    mine: &ProcessCard,
    theirs: &ProcessCard,
    _pairing: &Pairing,
) -> String {
    let list = |c: &HostCard| {
        c.interfaces
            .iter()
            .map(|i| format!("{} {}/{}", i.name, i.ipv4, i.prefix_len))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "usnic: no interface of rank {} (node {}: {}) can reach an interface of rank {} (node {}: {}): \
         no shared subnet and no route; run `kestrel-ifmatch explain` on the two cards (`kestrel-ifmatch card` on each host)",
        mine.rank,
        mine.card.node,
        list(&mine.card),
        theirs.rank,
        theirs.card.node,
        list(&theirs.card)
    )
}
