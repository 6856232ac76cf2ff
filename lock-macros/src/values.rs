//! The values of one attribute that passed their checks, by key: what `valid` hands on to the
//! key table's emitters (`keys::KEYS`) and to `distribution`.

use std::time::Duration;

use syn::LitStr;

/// The values that passed their checks, by key.
#[derive(Default)]
pub(crate) struct Values {
    /// Keys given (with a good value or not).
    pub(crate) given: Vec<&'static str>,
    pub(crate) checked: Vec<(&'static str, Checked)>,
}

/// A value that passed its key's check (`valid::check_values`).
pub(crate) enum Checked {
    Str(LitStr),
    /// Job names (`after`), each checked, none twice.
    Names(Vec<LitStr>),
    Duration(Duration),
    Bool(bool),
    Integer(u64),
}

impl Values {
    /// Whether `key` was given, whatever its value.
    pub(crate) fn given(&self, key: &str) -> bool {
        self.given.contains(&key)
    }

    fn get(&self, key: &str) -> Option<&Checked> {
        self.checked
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| value)
    }

    /// A string key's literal, if it passed its check.
    pub(crate) fn string(&self, key: &str) -> Option<&LitStr> {
        match self.get(key)? {
            Checked::Str(lit) => Some(lit),
            _ => None,
        }
    }

    /// A list key's names (one or more), if they passed their check.
    pub(crate) fn names(&self, key: &str) -> Option<&[LitStr]> {
        match self.get(key)? {
            Checked::Names(names) => Some(names),
            _ => None,
        }
    }

    /// A duration key's value, if it passed its check.
    pub(crate) fn duration(&self, key: &str) -> Option<Duration> {
        match self.get(key)? {
            Checked::Duration(duration) => Some(*duration),
            _ => None,
        }
    }

    /// An integer key's value, if it passed its check.
    pub(crate) fn integer(&self, key: &str) -> Option<u64> {
        match self.get(key)? {
            Checked::Integer(n) => Some(*n),
            _ => None,
        }
    }

    /// A bool key's value.
    pub(crate) fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Checked::Bool(on) => Some(*on),
            _ => None,
        }
    }
}
