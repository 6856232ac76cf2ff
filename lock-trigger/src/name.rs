//! The one rule for names, which the macros apply to the literal at compile time and the
//! scheduler and every provider at run time: [`check_lock_name`], [`check_job_name`].
//!
//! A name is shown on terminals, in log lines and on the dashboard, and stored in columns that
//! compare or pad it in their own ways. So it must be visible text: no control characters
//! (they move the cursor, clear the screen or forge a line), no bidirectional controls (they
//! reorder what is shown around them), no NUL (databases end or refuse a string there), and no
//! whitespace at either end (invisible, and ignored by ShedLock's `VARCHAR` on MySQL).

use std::fmt;

/// The longest lock name, in bytes: the lock table's `name` column is `VARCHAR(64)`.
pub const MAX_LOCK_NAME_LEN: usize = 64;

/// Why a lock or job name was refused; [`reason`](NameError::reason) says it in a sentence.
///
/// Offsets are in bytes from the start of the name, as `str` indexes count.
///
/// ```
/// use lock_trigger::{NameError, check_lock_name};
/// let err = check_lock_name("a\u{1b}[2J").unwrap_err();
/// assert_eq!(err, NameError::ControlCharacter { character: '\u{1b}', offset: 1 });
/// assert!(err.reason().contains("U+001B at byte 1"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_LOCK_NAME_LEN`] bytes.
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The name contains NUL (U+0000).
    Nul {
        /// The byte offset of the first NUL.
        offset: usize,
    },
    /// The name contains a control character other than NUL: C0 (U+0001–U+001F), DEL (U+007F)
    /// or C1 (U+0080–U+009F).
    ControlCharacter {
        /// The first one.
        character: char,
        /// Its byte offset.
        offset: usize,
    },
    /// The name contains a bidirectional control: U+061C, U+200E, U+200F, U+202A–U+202E or
    /// U+2066–U+2069.
    BidiControl {
        /// The first one.
        character: char,
        /// Its byte offset.
        offset: usize,
    },
    /// The name is whitespace only.
    Blank {
        /// Its length in bytes.
        len: usize,
    },
    /// The name starts with whitespace (at byte 0).
    LeadingWhitespace {
        /// The first character.
        character: char,
    },
    /// The name ends with whitespace.
    TrailingWhitespace {
        /// The last character.
        character: char,
        /// Its byte offset.
        offset: usize,
    },
}

impl NameError {
    /// The rule that was broken, in a sentence naming the offending character by code point
    /// and byte offset.
    ///
    /// ```
    /// let err = lock_trigger::check_lock_name("x\u{202e}").unwrap_err();
    /// assert_eq!(
    ///     err.reason(),
    ///     "a name must not contain bidirectional controls: U+202E at byte 1 \
    ///      (they reorder the text shown around them)"
    /// );
    /// ```
    pub fn reason(self) -> String {
        match self {
            NameError::Empty => "a lock name must not be empty".to_owned(),
            NameError::TooLong { .. } => format!(
                "a lock name must be at most {MAX_LOCK_NAME_LEN} bytes (the lock table's name \
                 column is VARCHAR({MAX_LOCK_NAME_LEN}))"
            ),
            NameError::Nul { offset } => format!(
                "a name must not contain NUL: U+0000 at byte {offset} (databases end or \
                 refuse a string there)"
            ),
            NameError::ControlCharacter { character, offset } => format!(
                "a name must not contain control characters: {} at byte {offset} (they \
                 move the cursor or forge lines where the name is shown)",
                code_point(character)
            ),
            NameError::BidiControl { character, offset } => format!(
                "a name must not contain bidirectional controls: {} at byte {offset} \
                 (they reorder the text shown around them)",
                code_point(character)
            ),
            NameError::Blank { len } => {
                format!("a name must not be only whitespace ({len} bytes of it)")
            }
            NameError::LeadingWhitespace { character } => format!(
                "a name must not start with whitespace: {} at byte 0",
                code_point(character)
            ),
            NameError::TrailingWhitespace { character, offset } => format!(
                "a name must not end with whitespace: {} at byte {offset} (a lock table \
                 made by ShedLock's DDL on MySQL ignores trailing spaces)",
                code_point(character)
            ),
        }
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason())
    }
}

impl std::error::Error for NameError {}

/// `U+001B`: how a character is named in messages.
fn code_point(c: char) -> String {
    format!("U+{:04X}", u32::from(c))
}

/// Whether `c` is a Unicode bidirectional control: the embeddings and overrides
/// (U+202A–U+202E), the isolates (U+2066–U+2069) and the marks (U+200E, U+200F, U+061C).
///
/// ```
/// assert!(lock_trigger::is_bidi_control('\u{202e}'));
/// assert!(!lock_trigger::is_bidi_control('a'));
/// ```
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

/// Checks a lock name: not empty, at most [`MAX_LOCK_NAME_LEN`] bytes, and the character
/// rule of [`check_job_name`].
///
/// ```
/// use lock_trigger::{NameError, check_lock_name};
/// assert_eq!(check_lock_name("sync_bill"), Ok(()));
/// assert_eq!(check_lock_name(""), Err(NameError::Empty));
/// assert_eq!(check_lock_name(&"x".repeat(65)), Err(NameError::TooLong { len: 65 }));
/// assert_eq!(check_lock_name("a\0b"), Err(NameError::Nul { offset: 1 }));
/// assert_eq!(check_lock_name("   "), Err(NameError::Blank { len: 3 }));
/// ```
pub fn check_lock_name(name: &str) -> Result<(), NameError> {
    if name.len() > MAX_LOCK_NAME_LEN {
        return Err(NameError::TooLong { len: name.len() });
    }
    check_job_name(name)
}

/// Checks a job name: not empty, no NUL, control character or bidirectional control, and no
/// whitespace at either end. A job's name has no length limit of its own (its lock name has:
/// see [`check_lock_name`]).
///
/// ```
/// use lock_trigger::{NameError, check_job_name};
/// assert_eq!(check_job_name("nightly report"), Ok(()));
/// assert_eq!(
///     check_job_name("nl\nbilling"),
///     Err(NameError::ControlCharacter { character: '\n', offset: 2 })
/// );
/// assert_eq!(
///     check_job_name("report "),
///     Err(NameError::TrailingWhitespace { character: ' ', offset: 6 })
/// );
/// ```
pub fn check_job_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    for (offset, character) in name.char_indices() {
        if character == '\0' {
            return Err(NameError::Nul { offset });
        }
        if character.is_control() {
            return Err(NameError::ControlCharacter { character, offset });
        }
        if is_bidi_control(character) {
            return Err(NameError::BidiControl { character, offset });
        }
    }
    if name.chars().all(char::is_whitespace) {
        return Err(NameError::Blank { len: name.len() });
    }
    if let Some(character) = name.chars().next().filter(|c| c.is_whitespace()) {
        return Err(NameError::LeadingWhitespace { character });
    }
    if let Some((offset, character)) = name.char_indices().next_back()
        && character.is_whitespace()
    {
        return Err(NameError::TrailingWhitespace { character, offset });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_in_bytes() {
        assert_eq!(check_lock_name(&"é".repeat(32)), Ok(()));
        assert_eq!(
            check_lock_name(&"é".repeat(33)),
            Err(NameError::TooLong { len: 66 })
        );
    }

    #[test]
    fn every_control_character_is_refused_with_its_code_point_and_offset() {
        let controls = ('\u{1}'..='\u{1f}')
            .chain(['\u{7f}'])
            .chain('\u{80}'..='\u{9f}');
        for c in controls {
            let name = format!("ab{c}");
            let err = check_lock_name(&name).unwrap_err();
            assert_eq!(
                err,
                NameError::ControlCharacter {
                    character: c,
                    offset: 2
                }
            );
            let point = format!("U+{:04X} at byte 2", u32::from(c));
            assert!(err.reason().contains(&point), "{}", err.reason());
        }
    }

    #[test]
    fn nul_is_refused_wherever_it_is() {
        assert_eq!(check_lock_name("\0"), Err(NameError::Nul { offset: 0 }));
        let err = check_lock_name("éa\0b").unwrap_err();
        assert_eq!(err, NameError::Nul { offset: 3 });
        assert!(err.reason().contains("U+0000 at byte 3"), "{err}");
    }

    #[test]
    fn every_bidi_control_is_refused() {
        let bidi = ('\u{202a}'..='\u{202e}')
            .chain('\u{2066}'..='\u{2069}')
            .chain(['\u{200e}', '\u{200f}', '\u{61c}']);
        for c in bidi {
            let err = check_lock_name(&format!("pay{c}roll")).unwrap_err();
            assert_eq!(
                err,
                NameError::BidiControl {
                    character: c,
                    offset: 3
                }
            );
            assert!(
                err.reason()
                    .contains(&format!("U+{:04X} at byte 3", u32::from(c))),
                "{err}"
            );
        }
        // Right-to-left text itself is a name like any other.
        assert_eq!(check_lock_name("تقرير"), Ok(()));
    }

    #[test]
    fn whitespace_only_at_the_ends_and_never_alone() {
        assert_eq!(check_lock_name("   "), Err(NameError::Blank { len: 3 }));
        assert_eq!(
            check_lock_name("\u{3000}"),
            Err(NameError::Blank { len: 3 })
        );
        assert_eq!(
            check_lock_name(" x"),
            Err(NameError::LeadingWhitespace { character: ' ' })
        );
        let err = check_lock_name("x\u{a0}").unwrap_err();
        assert_eq!(
            err,
            NameError::TrailingWhitespace {
                character: '\u{a0}',
                offset: 1
            }
        );
        assert!(err.reason().contains("U+00A0 at byte 1"), "{err}");
        assert_eq!(check_lock_name("nightly report"), Ok(()));
    }

    #[test]
    fn a_job_name_has_the_rule_without_the_length() {
        assert_eq!(check_job_name(&"j".repeat(200)), Ok(()));
        assert_eq!(check_job_name(""), Err(NameError::Empty));
        assert_eq!(
            check_job_name("a\u{2066}"),
            Err(NameError::BidiControl {
                character: '\u{2066}',
                offset: 1
            })
        );
    }
}
