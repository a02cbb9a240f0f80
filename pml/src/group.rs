//! Process groups: ordered sets of job ranks.

/// Result of comparing two groups (`MPI_Group_compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupRelation {
    /// Same members in the same order.
    Identical,
    /// Same members, different order.
    Similar,
    /// Different members.
    Unequal,
}

/// An ordered set of job ranks; a member's position is its rank in the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    members: Vec<u32>,
}

/// A group operation named a rank that is not in the group, or a rank twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupError(pub String);

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Group {
    /// A group of these job ranks, in this order.
    pub fn new(members: Vec<u32>) -> Self {
        Group { members }
    }

    /// Number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The job rank of group rank `r`.
    pub fn job_rank(&self, r: usize) -> Option<u32> {
        self.members.get(r).copied()
    }

    /// The group rank of job rank `job`.
    pub fn rank_of(&self, job: u32) -> Option<usize> {
        self.members.iter().position(|&m| m == job)
    }

    /// Members in rank order.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    fn check(&self, ranks: &[usize], what: &str) -> Result<(), GroupError> {
        let mut seen = vec![false; self.size()];
        for &r in ranks {
            match seen.get_mut(r) {
                None => {
                    return Err(GroupError(format!(
                        "{what}: rank {r} is not in a group of {}",
                        self.size()
                    )))
                }
                Some(true) => return Err(GroupError(format!("{what}: rank {r} is listed twice"))),
                Some(s) => *s = true,
            }
        }
        Ok(())
    }

    /// The members at `ranks`, in that order (`MPI_Group_incl`).
    pub fn incl(&self, ranks: &[usize]) -> Result<Group, GroupError> {
        self.check(ranks, "group incl")?;
        Ok(Group::new(ranks.iter().map(|&r| self.members[r]).collect()))
    }

    /// All members except those at `ranks`, in group order (`MPI_Group_excl`).
    pub fn excl(&self, ranks: &[usize]) -> Result<Group, GroupError> {
        self.check(ranks, "group excl")?;
        Ok(Group::new(
            self.members
                .iter()
                .enumerate()
                .filter(|(i, _)| !ranks.contains(i))
                .map(|(_, &m)| m)
                .collect(),
        ))
    }

    /// The rank in `other` of each of our `ranks` (`None` = not a member there).
    pub fn translate(
        &self,
        ranks: &[usize],
        other: &Group,
    ) -> Result<Vec<Option<usize>>, GroupError> {
        ranks
            .iter()
            .map(|&r| {
                let job = self.job_rank(r).ok_or_else(|| {
                    GroupError(format!(
                        "group translate: rank {r} is not in a group of {}",
                        self.size()
                    ))
                })?;
                Ok(other.rank_of(job))
            })
            .collect()
    }

    /// `MPI_Group_compare`.
    pub fn compare(&self, other: &Group) -> GroupRelation {
        if self.members == other.members {
            return GroupRelation::Identical;
        }
        let mut a = self.members.clone();
        let mut b = other.members.clone();
        a.sort_unstable();
        b.sort_unstable();
        if a == b {
            GroupRelation::Similar
        } else {
            GroupRelation::Unequal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incl_excl_translate_compare() {
        let g = Group::new(vec![10, 11, 12, 13]);
        let a = g.incl(&[3, 1]).unwrap();
        assert_eq!(a.members(), &[13, 11]);
        let b = g.excl(&[0, 2]).unwrap();
        assert_eq!(b.members(), &[11, 13]);
        assert_eq!(a.compare(&b), GroupRelation::Similar);
        assert_eq!(b.compare(&b.clone()), GroupRelation::Identical);
        assert_eq!(a.compare(&g), GroupRelation::Unequal);
        assert_eq!(
            g.translate(&[0, 1, 3], &a).unwrap(),
            vec![None, Some(1), Some(0)]
        );
        assert!(g.incl(&[4]).is_err());
        assert!(g.incl(&[1, 1]).is_err());
        assert!(g.translate(&[9], &a).is_err());
    }
}
