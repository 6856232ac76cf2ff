//! Values written into a statement's text, for the batches that send many statements (or one
//! statement of many rows) as one text query: no `?` parameters there, so every value is a
//! literal, written without any escaping that depends on the session's `sql_mode`
//! (`NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`).
//!
//! - Text is `_utf8mb4 X'…'` (hexadecimal): no character needs escaping, and the introducer
//!   makes it a `utf8mb4` string (coercible, like a parameter) whatever the connection's
//!   character set.
//! - A time is `TIMESTAMP'YYYY-MM-DD hh:mm:ss.ffffff'`: a `DATETIME` value with the
//!   microseconds a bound parameter carries, so the column rounds it as it rounds the parameter.
//! - Integers are their digits; a missing value is `NULL`.

use std::fmt::Write;

use chrono::NaiveDateTime;

/// Text as `_utf8mb4 X'…'`; the empty text as `''`.
pub(super) fn text(out: &mut String, value: &str) {
    if value.is_empty() {
        out.push_str("''");
        return;
    }
    out.push_str("_utf8mb4 X'");
    for byte in value.as_bytes() {
        let _ = write!(out, "{byte:02X}");
    }
    out.push('\'');
}

/// Text, or `NULL`.
pub(super) fn nullable_text(out: &mut String, value: Option<&str>) {
    match value {
        Some(value) => text(out, value),
        None => out.push_str("NULL"),
    }
}

/// A time (UTC wall time) as `TIMESTAMP'…'`, to the microsecond.
pub(super) fn time(out: &mut String, value: NaiveDateTime) {
    let _ = write!(out, "TIMESTAMP'{}'", value.format("%Y-%m-%d %H:%M:%S%.6f"));
}

/// A time, or `NULL`.
pub(super) fn nullable_time(out: &mut String, value: Option<NaiveDateTime>) {
    match value {
        Some(value) => time(out, value),
        None => out.push_str("NULL"),
    }
}

/// An integer.
pub(super) fn integer(out: &mut String, value: i64) {
    let _ = write!(out, "{value}");
}

/// The bytes a text takes as a literal, for bounding a batch's text before writing it.
pub(super) fn text_len(value: &str) -> usize {
    "_utf8mb4 X''".len() + 2 * value.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_needs_no_escaping() {
        let mut out = String::new();
        text(&mut out, "a'b\\");
        assert_eq!(out, "_utf8mb4 X'6127625C'");
        assert_eq!(out.len(), text_len("a'b\\"));
    }

    #[test]
    fn missing_values_are_null_and_times_keep_microseconds() {
        let mut out = String::new();
        nullable_text(&mut out, None);
        out.push(',');
        nullable_time(&mut out, None);
        out.push(',');
        let at = chrono::DateTime::from_timestamp(1_700_000_000, 123_456_000)
            .expect("a time")
            .naive_utc();
        time(&mut out, at);
        out.push(',');
        integer(&mut out, -1);
        assert_eq!(out, "NULL,NULL,TIMESTAMP'2023-11-14 22:13:20.123456',-1");
    }
}
