//! The per-communicator layout of hierarchical collectives (see `crate::coll_hier`, which
//! owns the algorithms and the decision): which sub-contexts a communicator has and where
//! each member sits. Kept in the engine, which stores one per context; it never communicates.

/// The sub-communicators of one communicator.
#[derive(Debug)]
pub(crate) struct Hier {
    /// This process's node: the communicator's members on it, lowest first (rank 0 leads).
    pub(crate) node_ctx: u16,
    /// The leaders, one per node in node order; `None` on members that do not lead.
    pub(crate) leader_ctx: Option<u16>,
    /// This process's node (index into `members`).
    pub(crate) my_node: u32,
    /// Per communicator rank: (node index, rank in that node's communicator).
    pub(crate) place: Vec<(u32, u32)>,
    /// Per node: its members' communicator ranks, lowest first.
    pub(crate) members: Vec<Vec<u32>>,
}

/// A communicator split by node: what becomes [`Hier`]'s `place` and `members`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) place: Vec<(u32, u32)>,
    pub(crate) members: Vec<Vec<u32>>,
}

impl Hier {
    /// Splits a communicator of job ranks `group` by `node_of`; `None` when the hierarchy
    /// would be flat (one node, or one member per node).
    pub(crate) fn layout(group: &[u32], node_of: impl Fn(u32) -> String) -> Option<Layout> {
        let mut names: Vec<String> = Vec::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        let mut place = Vec::with_capacity(group.len());
        for (rank, &job_rank) in group.iter().enumerate() {
            let name = node_of(job_rank);
            let node = match names.iter().position(|n| *n == name) {
                Some(i) => i,
                None => {
                    names.push(name);
                    members.push(Vec::new());
                    names.len() - 1
                }
            };
            place.push((node as u32, members[node].len() as u32));
            members[node].push(rank as u32);
        }
        let worth_it = members.len() >= 2 && members.iter().any(|m| m.len() > 1);
        worth_it.then_some(Layout { place, members })
    }
}

impl Hier {
    /// Whether node-major order is rank order (each node's members are consecutive ranks and
    /// nodes come in rank order, as a block-placed launch gives): then the permutations below
    /// are the identity, and the hierarchical gathers and scatters skip them (a 4 MiB copy
    /// costs hundreds of microseconds).
    pub(crate) fn in_rank_order(&self) -> bool {
        self.members
            .iter()
            .flatten()
            .enumerate()
            .all(|(i, &r)| i as u32 == r)
    }

    /// `by_node` holds blocks of `len` bytes node by node (members lowest first): writes
    /// them to `out` in communicator rank order.
    pub(crate) fn node_major_to_rank_order(&self, by_node: &[u8], out: &mut [u8], len: usize) {
        let mut at = 0;
        for m in &self.members {
            for &r in m {
                let r = r as usize;
                out[r * len..(r + 1) * len].copy_from_slice(&by_node[at..at + len]);
                at += len;
            }
        }
    }

    /// The inverse of [`Hier::node_major_to_rank_order`].
    pub(crate) fn rank_order_to_node_major(&self, ordered: &[u8], out: &mut [u8], len: usize) {
        let mut at = 0;
        for m in &self.members {
            for &r in m {
                let r = r as usize;
                out[at..at + len].copy_from_slice(&ordered[r * len..(r + 1) * len]);
                at += len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes<'a>(spec: &'a [&'a str]) -> impl Fn(u32) -> String + 'a {
        move |r| spec[r as usize].to_string()
    }

    #[test]
    fn one_node_or_one_member_per_node_stays_flat() {
        assert!(Hier::layout(&[0, 1, 2], nodes(&["a", "a", "a"])).is_none());
        assert!(Hier::layout(&[0, 1, 2], nodes(&["a", "b", "c"])).is_none());
        assert!(Hier::layout(&[0], nodes(&["a"])).is_none());
    }

    #[test]
    fn nodes_are_ordered_by_their_lowest_member_and_members_by_rank() {
        // Ranks interleaved over two nodes, and a communicator whose job ranks are permuted.
        let Layout { place, members } = Hier::layout(
            &[5, 2, 7, 0],
            nodes(&["a", "b", "b", "a", "a", "b", "a", "a"]),
        )
        .unwrap();
        // job ranks 5 (b), 2 (b), 7 (a), 0 (a): node 0 = b with comm ranks 0, 1; node 1 = a.
        assert_eq!(members, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(place, vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
    }

    #[test]
    fn node_major_blocks_round_trip_to_rank_order() {
        let Layout { place, members } =
            Hier::layout(&[0, 1, 2, 3, 4], nodes(&["a", "b", "a", "b", "a"])).unwrap();
        let h = Hier {
            node_ctx: 9,
            leader_ctx: Some(10),
            my_node: 0,
            place,
            members,
        };
        // Node a: ranks 0, 2, 4; node b: 1, 3; blocks of 2 bytes holding the rank.
        let by_node: Vec<u8> = [0u8, 2, 4, 1, 3].iter().flat_map(|&r| [r, r]).collect();
        let mut ordered = vec![0u8; 10];
        h.node_major_to_rank_order(&by_node, &mut ordered, 2);
        assert_eq!(ordered, vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
        let mut back = vec![0u8; 10];
        h.rank_order_to_node_major(&ordered, &mut back, 2);
        assert_eq!(back, by_node);
        assert!(!h.in_rank_order());
    }

    #[test]
    fn block_placement_is_in_rank_order() {
        let hier = |spec: &[&str]| {
            let n = spec.len() as u32;
            let Layout { place, members } =
                Hier::layout(&(0..n).collect::<Vec<_>>(), nodes(spec)).unwrap();
            Hier {
                node_ctx: 9,
                leader_ctx: None,
                my_node: 0,
                place,
                members,
            }
        };
        assert!(hier(&["a", "a", "b", "b"]).in_rank_order());
        assert!(hier(&["a", "b", "b", "c", "c", "c"]).in_rank_order());
        assert!(!hier(&["a", "b", "a", "b"]).in_rank_order());
        assert!(!hier(&["a", "b", "b", "a"]).in_rank_order());
    }
}
