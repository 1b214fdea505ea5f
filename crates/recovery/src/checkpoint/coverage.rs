//! Which owned key groups a restore has found a checkpoint for: the commits met newest first
//! each take the groups they hold that are still open.

use actionstate_core::{KeyId, Ownership};

/// The owned key groups still waiting for a checkpoint.
#[derive(Debug)]
pub(crate) struct Coverage {
    /// The group count and, per group, whether it still waits; `None` while a restore of
    /// every key has met no checkpoint of a range of groups (the count is not known yet).
    open: Option<(u16, Vec<bool>)>,
    done: bool,
}

/// The keys a commit was chosen for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Every key it holds.
    Every,
    /// The keys of these groups among `max_groups`.
    Groups { max_groups: u16, groups: Vec<bool> },
}

impl Taken {
    /// Whether the commit was chosen for `key`.
    pub(crate) fn holds(&self, key: &KeyId) -> bool {
        match self {
            Taken::Every => true,
            Taken::Groups { max_groups, groups } => groups.get(usize::from(key.key_group(*max_groups))) == Some(&true),
        }
    }
}

impl Coverage {
    /// Nothing found yet for `ownership`.
    pub(crate) fn new(ownership: &Ownership) -> Self {
        match ownership {
            Ownership::All => Coverage { open: None, done: false },
            Ownership::Groups { max_groups, owned } => {
                let open: Vec<bool> = (0..*max_groups).map(|g| owned.contains(&g)).collect();
                let done = !open.contains(&true);
                Coverage { open: Some((*max_groups, open)), done }
            }
        }
    }

    /// Whether every owned group has its checkpoint.
    pub(crate) fn done(&self) -> bool {
        self.done
    }

    /// Takes for a commit of `owner` the open groups it holds: `None` when it holds none,
    /// `Err` when its groups are counted among another number of groups than the open ones
    /// (their keys cannot be told apart).
    pub(crate) fn take(&mut self, owner: &Ownership) -> Result<Option<Taken>, ()> {
        if self.done {
            return Ok(None);
        }
        match (owner, &mut self.open) {
            (Ownership::All, None) => {
                self.done = true;
                Ok(Some(Taken::Every))
            }
            (Ownership::All, Some((max_groups, open))) => {
                let groups = std::mem::take(open);
                self.done = true;
                Ok(Some(Taken::Groups { max_groups: *max_groups, groups }))
            }
            (Ownership::Groups { max_groups, owned }, slot) => {
                let (space, open) = slot.get_or_insert_with(|| (*max_groups, vec![true; usize::from(*max_groups)]));
                if space != max_groups {
                    return Err(());
                }
                let mut groups = vec![false; open.len()];
                let mut any = false;
                for g in owned.clone() {
                    if let Some(slot) = open.get_mut(usize::from(g))
                        && *slot
                    {
                        *slot = false;
                        groups[usize::from(g)] = true;
                        any = true;
                    }
                }
                self.done = !open.contains(&true);
                Ok(any.then_some(Taken::Groups { max_groups: *max_groups, groups }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(owned: std::ops::Range<u16>) -> Ownership {
        Ownership::Groups { max_groups: 8, owned }
    }

    #[test]
    fn a_checkpoint_of_every_key_covers_any_ownership() {
        let mut all = Coverage::new(&Ownership::All);
        assert_eq!(all.take(&Ownership::All), Ok(Some(Taken::Every)));
        assert!(all.done());
        let mut part = Coverage::new(&groups(2..6));
        let Ok(Some(Taken::Groups { groups, .. })) = part.take(&Ownership::All) else { panic!("taken") };
        assert_eq!(groups, [false, false, true, true, true, true, false, false]);
        assert!(part.done());
    }

    #[test]
    fn after_a_rescale_each_former_owner_covers_its_share_newest_first() {
        let mut c = Coverage::new(&groups(2..6));
        let Ok(Some(first)) = c.take(&groups(4..8)) else { panic!("the newer owner takes 4..6") };
        assert!(!c.done());
        assert_eq!(c.take(&groups(4..8)), Ok(None), "an older checkpoint of the same groups is not needed");
        let Ok(Some(second)) = c.take(&groups(0..4)) else { panic!("the other owner takes 2..4") };
        assert!(c.done());
        let key = (0u32..)
            .map(|i| KeyId::of(&i.to_le_bytes()))
            .find(|k| k.key_group(8) == 5)
            .expect("some key is in group 5");
        assert!(first.holds(&key) && !second.holds(&key));
        assert_eq!(c.take(&Ownership::All), Ok(None), "nothing is open any more");
    }

    #[test]
    fn a_restore_of_every_key_learns_the_group_count_from_the_first_range() {
        let mut c = Coverage::new(&Ownership::All);
        assert!(matches!(c.take(&groups(0..4)), Ok(Some(_))));
        assert!(!c.done(), "groups 4..8 are still open");
        assert_eq!(c.take(&Ownership::Groups { max_groups: 16, owned: 0..16 }), Err(()));
        assert!(matches!(c.take(&Ownership::All), Ok(Some(Taken::Groups { .. }))));
        assert!(c.done());
    }

    #[test]
    fn an_empty_ownership_needs_nothing() {
        assert!(Coverage::new(&groups(3..3)).done());
    }
}
