//! Component lists in the two forms operators know from Open MPI: an include list
//! (`shm,usnic,self`, order = preference) or an exclude list (`^usnic`, the caret applies to the
//! whole list).
//!
//! Parsing is strict: mixing the forms or naming a component that does not exist is an error
//! that lists the components that do, because a typo that silently disables a transport costs
//! users hours.

use std::fmt;

/// A parsed component list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Use only these components, in this order of preference.
    Include(Vec<String>),
    /// Use every known component except these.
    Exclude(Vec<String>),
}

/// Why a component list was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectionError {
    /// The list is empty or has an empty entry (`shm,,self`).
    EmptyEntry {
        /// Framework the list selects from (`btl`).
        framework: String,
        /// The list as given.
        list: String,
        /// Known components of the framework.
        known: Vec<String>,
    },
    /// The list mixes `a,b` and `^c` forms.
    MixedForms {
        /// Framework the list selects from.
        framework: String,
        /// The list as given.
        list: String,
        /// Known components of the framework.
        known: Vec<String>,
    },
    /// The list names a component the framework does not have.
    Unknown {
        /// Framework the list selects from.
        framework: String,
        /// The list as given.
        list: String,
        /// The unknown names.
        unknown: Vec<String>,
        /// Known components of the framework.
        known: Vec<String>,
    },
}

impl fmt::Display for SelectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectionError::EmptyEntry {
                framework,
                list,
                known,
            } => write!(
                f,
                "{framework} component list '{list}' has an empty entry; give names separated by \
                 commas (known {framework} components: {})",
                known.join(", ")
            ),
            SelectionError::MixedForms {
                framework,
                list,
                known,
            } => write!(
                f,
                "{framework} component list '{list}' mixes include and exclude forms; use either \
                 an include list like '{}' or an exclude list like '^{}' (the caret applies to the \
                 whole list; known {framework} components: {})",
                known.join(","),
                known.last().map(String::as_str).unwrap_or("name"),
                known.join(", ")
            ),
            SelectionError::Unknown {
                framework,
                list,
                unknown,
                known,
            } => {
                let quoted: Vec<String> = unknown.iter().map(|u| format!("'{u}'")).collect();
                write!(
                    f,
                    "{framework} component list '{list}' names unknown component{} {}; known \
                     {framework} components: {}",
                    if unknown.len() == 1 { "" } else { "s" },
                    quoted.join(", "),
                    known.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for SelectionError {}

impl Selection {
    /// Parses `text` as a component list of `framework`, whose components are `known`.
    pub fn parse(framework: &str, text: &str, known: &[&str]) -> Result<Selection, SelectionError> {
        let known_owned = || known.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let trimmed = text.trim();
        let (exclude, body) = match trimmed.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let mut names = Vec::new();
        for raw in body.split(',') {
            let name = raw.trim();
            if name.is_empty() {
                return Err(SelectionError::EmptyEntry {
                    framework: framework.into(),
                    list: text.into(),
                    known: known_owned(),
                });
            }
            if name.starts_with('^') {
                return Err(SelectionError::MixedForms {
                    framework: framework.into(),
                    list: text.into(),
                    known: known_owned(),
                });
            }
            if !names.iter().any(|n: &String| n == name) {
                names.push(name.to_string());
            }
        }
        let unknown: Vec<String> = names
            .iter()
            .filter(|n| !known.contains(&n.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(SelectionError::Unknown {
                framework: framework.into(),
                list: text.into(),
                unknown,
                known: known_owned(),
            });
        }
        Ok(if exclude {
            Selection::Exclude(names)
        } else {
            Selection::Include(names)
        })
    }

    /// Whether `component` may be used.
    pub fn allows(&self, component: &str) -> bool {
        match self {
            Selection::Include(names) => names.iter().any(|n| n == component),
            Selection::Exclude(names) => !names.iter().any(|n| n == component),
        }
    }

    /// The selected components in order of preference: the include order, or the order of
    /// `known` for an exclude list.
    pub fn ordered<'a>(&'a self, known: &[&'a str]) -> Vec<&'a str> {
        match self {
            Selection::Include(names) => names.iter().map(String::as_str).collect(),
            Selection::Exclude(_) => known.iter().copied().filter(|k| self.allows(k)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BTLS: &[&str] = &["self", "shm", "usnic"];

    #[test]
    fn include_list_keeps_order_and_drops_repeats() {
        let s = Selection::parse("btl", "usnic, shm,usnic", BTLS).unwrap();
        assert_eq!(s, Selection::Include(vec!["usnic".into(), "shm".into()]));
        assert_eq!(s.ordered(BTLS), vec!["usnic", "shm"]);
        assert!(!s.allows("self"));
    }

    #[test]
    fn exclude_list_applies_caret_to_whole_list() {
        let s = Selection::parse("btl", "^usnic,shm", BTLS).unwrap();
        assert_eq!(s.ordered(BTLS), vec!["self"]);
        assert!(s.allows("self") && !s.allows("shm") && !s.allows("usnic"));
    }

    #[test]
    fn unknown_component_is_named_with_the_known_ones() {
        let e = Selection::parse("btl", "shm,bogus", BTLS).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("'bogus'"), "{msg}");
        assert!(msg.contains("self, shm, usnic"), "{msg}");
    }

    #[test]
    fn mixing_forms_is_rejected() {
        for list in ["shm,^usnic", "^shm,^usnic"] {
            let e = Selection::parse("btl", list, BTLS).unwrap_err();
            assert!(matches!(e, SelectionError::MixedForms { .. }), "{list}");
            assert!(e.to_string().contains("self, shm, usnic"));
        }
    }

    #[test]
    fn empty_entries_are_rejected() {
        for list in ["", "^", "shm,,self", "shm,"] {
            let e = Selection::parse("btl", list, BTLS).unwrap_err();
            assert!(matches!(e, SelectionError::EmptyEntry { .. }), "{list}");
        }
    }
}
