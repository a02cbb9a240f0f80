//! What is wrong with a card: the problem ([`CardProblem`]), the field it is in
//! ([`InvalidField`]), and the card's source ([`CardError`]).
//!
//! This module owns the wording of card errors. It must never decide what is valid (that is
//! `rules`): it only says which field broke which rule, and how to fix it.

use std::fmt;

/// What is wrong with one field of a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardProblem {
    /// The file could not be read.
    Unreadable {
        /// The operating system's reason.
        reason: String,
    },
    /// The text is not JSON.
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// A required field is absent.
    MissingField {
        /// The fields an object at this place must have.
        required: &'static [&'static str],
    },
    /// The field holds the wrong JSON type.
    WrongType {
        /// What the format requires.
        expected: &'static str,
        /// What the card holds.
        found: String,
    },
    /// A number or length outside its admissible range.
    OutOfRange {
        /// The offending value, as written.
        value: String,
        /// The admissible range, as a person would write it.
        allowed: &'static str,
    },
    /// An address that does not parse or cannot be an interface or route address.
    BadAddress {
        /// The offending text.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// The `version` field names a version this build cannot read.
    UnknownVersion {
        /// The version found.
        found: String,
        /// The versions this build reads.
        supported: Vec<u32>,
    },
    /// A field that the format does not have.
    UnknownField {
        /// The fields allowed at this place.
        allowed: &'static [&'static str],
        /// The allowed field closest in spelling, when one is close.
        suggestion: Option<&'static str>,
    },
    /// A name that is malformed, duplicated or refers to nothing.
    BadName {
        /// The offending name.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
}

impl fmt::Display for CardProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CardProblem::Unreadable { reason } => write!(f, "cannot read the file: {reason}"),
            CardProblem::Syntax {
                line,
                column,
                message,
            } => write!(
                f,
                "not valid JSON (line {line}, column {column}: {message})"
            ),
            CardProblem::MissingField { required } => {
                write!(f, "missing (required here: {})", required.join(", "))
            }
            CardProblem::WrongType { expected, found } => {
                write!(f, "must be {expected}, found {found}")
            }
            CardProblem::OutOfRange { value, allowed } => {
                write!(f, "{value} is out of range (allowed: {allowed})")
            }
            CardProblem::BadAddress { value, reason } => write!(f, "'{value}' {reason}"),
            CardProblem::UnknownVersion { found, supported } => {
                let list: Vec<String> = supported.iter().map(u32::to_string).collect();
                write!(
                    f,
                    "{found} is not a supported card version (this build reads version \
                     {}); write the card in that format",
                    list.join(", ")
                )
            }
            CardProblem::UnknownField {
                allowed,
                suggestion,
            } => {
                write!(f, "not a field of the card format")?;
                if let Some(s) = suggestion {
                    write!(f, "; did you mean '{s}'?")?;
                }
                write!(f, " (fields allowed here: {})", allowed.join(", "))
            }
            CardProblem::BadName { value, reason } => write!(f, "'{value}' {reason}"),
        }
    }
}

/// A field of a card that fails validation, located by its path (`interfaces[1].prefix_len`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidField {
    /// Path of the field, as in the JSON card; empty for the card as a whole.
    pub field: String,
    /// What is wrong with it.
    pub problem: CardProblem,
}

impl InvalidField {
    pub(super) fn new(field: impl Into<String>, problem: CardProblem) -> Self {
        InvalidField {
            field: field.into(),
            problem,
        }
    }
}

impl fmt::Display for InvalidField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "field {}: {}", self.field, self.problem)
        }
    }
}

/// A JSON card that cannot be used: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardError {
    /// Where the card came from (a file name given by the caller).
    pub source: String,
    /// Path of the offending field; empty when the problem concerns the whole text.
    pub field: String,
    /// What is wrong.
    pub problem: CardProblem,
}

impl CardError {
    pub(super) fn at(source: &str, invalid: InvalidField) -> Self {
        CardError {
            source: source.to_string(),
            field: invalid.field,
            problem: invalid.problem,
        }
    }
}

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usnic business card '{}': ", self.source)?;
        if self.field.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "field {}: {}", self.field, self.problem)
        }
    }
}

impl std::error::Error for CardError {}
