//! A manual run's parameters (`lockctl trigger NAME --param key=value`, the dashboard's trigger
//! form, [`JobContext::params`]): the rule for keys and values, and how they are stored.
//!
//! Decisions, and why:
//! - **Keys are identifiers** (`[A-Za-z0-9_.-]`, at most [`MAX_PARAM_KEY_LEN`] bytes): they are
//!   typed on a command line and shown in logs and pages, so nothing needs quoting.
//! - **Values are text without control characters** (at most [`MAX_PARAM_VALUE_LEN`] bytes): a
//!   value cannot forge a log line or a terminal escape, as names cannot.
//! - **Order is kept and a key appears once**: what the operator typed is what the body reads.
//! - **Stored as `application/x-www-form-urlencoded`** (`key=value&other=x%20y`, through
//!   `form_urlencoded`): one text column in every backend, readable in a SQL shell.
//!
//! [`JobContext::params`]: https://docs.rs/lock-core/latest/lock_core/struct.JobContext.html#method.params

use std::fmt;

/// The most parameters one run takes.
pub const MAX_PARAMS: usize = 32;
/// The longest parameter key, in bytes.
pub const MAX_PARAM_KEY_LEN: usize = 64;
/// The longest parameter value, in bytes.
pub const MAX_PARAM_VALUE_LEN: usize = 1000;

/// The parameters of one manual run, in the order given; empty for every other fire.
///
/// ```
/// use lock_trigger::Params;
/// let params = Params::parse_pairs(["day=2026-12-01", "dry_run=true"])?;
/// assert_eq!(params.get("day"), Some("2026-12-01"));
/// assert_eq!(params.get("missing"), None);
/// let stored = params.encode();
/// assert_eq!(stored, "day=2026-12-01&dry_run=true");
/// assert_eq!(Params::decode(&stored)?, params);
/// # Ok::<(), lock_trigger::ParamsError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

/// Why parameters were refused; the message names the key and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsError(String);

impl fmt::Display for ParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParamsError {}

impl Params {
    /// No parameters.
    pub const fn new() -> Self {
        Params { pairs: Vec::new() }
    }

    /// Adds `key` = `value`, checked: a key of `[A-Za-z0-9_.-]` up to
    /// [`MAX_PARAM_KEY_LEN`] bytes, given once; a value without control characters up to
    /// [`MAX_PARAM_VALUE_LEN`] bytes; at most [`MAX_PARAMS`] of them.
    ///
    /// ```
    /// let mut params = lock_trigger::Params::new();
    /// params.insert("region", "eu-west")?;
    /// assert!(params.insert("region", "us").is_err(), "a key is given once");
    /// assert!(params.insert("bad key", "x").is_err());
    /// # Ok::<(), lock_trigger::ParamsError>(())
    /// ```
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), ParamsError> {
        let (key, value) = (key.into(), value.into());
        check_key(&key)?;
        check_value(&key, &value)?;
        if self.pairs.iter().any(|(k, _)| *k == key) {
            return Err(ParamsError(format!("parameter `{key}` is given twice")));
        }
        if self.pairs.len() == MAX_PARAMS {
            return Err(ParamsError(format!(
                "at most {MAX_PARAMS} parameters may be given"
            )));
        }
        self.pairs.push((key, value));
        Ok(())
    }

    /// Parameters from `key=value` texts, as `--param` takes them (the first `=` splits).
    ///
    /// ```
    /// let params = lock_trigger::Params::parse_pairs(["query=a=b"])?;
    /// assert_eq!(params.get("query"), Some("a=b"));
    /// assert!(lock_trigger::Params::parse_pairs(["no-equals-sign"]).is_err());
    /// # Ok::<(), lock_trigger::ParamsError>(())
    /// ```
    pub fn parse_pairs<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Result<Self, ParamsError> {
        let mut params = Params::new();
        for pair in pairs {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(ParamsError(format!(
                    "a parameter is `key=value`; {:?} has no `=`",
                    pair.chars().take(80).collect::<String>()
                )));
            };
            params.insert(key, value)?;
        }
        Ok(params)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every `(key, value)`, in the order given.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none (every fire but a manual one with parameters).
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// As stored: `application/x-www-form-urlencoded`; empty for no parameters.
    pub fn encode(&self) -> String {
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(self.pairs.iter())
            .finish()
    }

    /// Reads what [`encode`](Self::encode) wrote, checking every pair again (a row written by
    /// hand in a SQL shell gets the same rule as `--param`).
    pub fn decode(stored: &str) -> Result<Self, ParamsError> {
        let mut params = Params::new();
        for (key, value) in form_urlencoded::parse(stored.as_bytes()) {
            params.insert(key, value)?;
        }
        Ok(params)
    }
}

impl fmt::Display for Params {
    /// `key=value, other=x y`, for logs and pages (every value is free of control characters).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.pairs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

fn check_key(key: &str) -> Result<(), ParamsError> {
    if key.is_empty() {
        return Err(ParamsError("a parameter's key is empty".into()));
    }
    if key.len() > MAX_PARAM_KEY_LEN {
        return Err(ParamsError(format!(
            "parameter key `{}…` is longer than {MAX_PARAM_KEY_LEN} bytes",
            key.chars().take(32).collect::<String>()
        )));
    }
    if let Some(bad) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(ParamsError(format!(
            "parameter key {key:?} has {bad:?}; a key is letters, digits, `_`, `.` and `-`"
        )));
    }
    Ok(())
}

fn check_value(key: &str, value: &str) -> Result<(), ParamsError> {
    if value.len() > MAX_PARAM_VALUE_LEN {
        return Err(ParamsError(format!(
            "the value of parameter `{key}` is longer than {MAX_PARAM_VALUE_LEN} bytes"
        )));
    }
    if value
        .chars()
        .any(|c| c.is_control() || crate::is_bidi_control(c))
    {
        return Err(ParamsError(format!(
            "the value of parameter `{key}` has a control character; values are plain text"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_separators_round_trip() {
        let params = Params::parse_pairs(["q=a&b=c", "space=x y", "empty=", "uni=héllo"]).unwrap();
        assert_eq!(Params::decode(&params.encode()).unwrap(), params);
        assert_eq!(params.get("q"), Some("a&b=c"));
        assert_eq!(params.get("empty"), Some(""));
    }

    #[test]
    fn control_characters_and_long_values_are_refused() {
        assert!(Params::parse_pairs(["k=a\nb"]).is_err());
        assert!(Params::parse_pairs(["k=\u{202e}x"]).is_err());
        let long = format!("k={}", "x".repeat(MAX_PARAM_VALUE_LEN + 1));
        assert!(Params::parse_pairs([long.as_str()]).is_err());
        assert!(
            Params::decode("k=%0A").is_err(),
            "decode checks as insert does"
        );
    }

    #[test]
    fn at_most_max_params() {
        let pairs: Vec<String> = (0..=MAX_PARAMS).map(|i| format!("k{i}=v")).collect();
        let err = Params::parse_pairs(pairs.iter().map(String::as_str)).unwrap_err();
        assert!(err.to_string().contains("at most"), "{err}");
    }
}
