//! Batches for MySQL and MariaDB: many acquires (or releases) in one round trip and one
//! transaction, for any driver that can send several statements in one text query.
//!
//! The statements are the single ones ([`Statements::acquire`], [`Statements::release`]), each
//! with its parameters written as literals, in name order, between `START TRANSACTION` and
//! `COMMIT`: every request is decided by exactly the statement that decides it alone (and its
//! outcome read from its own OK packet, as alone), the rows are locked in one global order so
//! two instances' batches cannot deadlock, and the batch costs one commit instead of one per
//! request. A losing acquire changes no value, as alone; its row lock lasts until the batch's
//! `COMMIT`, which ends the same round trip.
//!
//! Literals are written without any escaping that depends on the session's `sql_mode`: text as
//! `_utf8mb4 X'…'` (hexadecimal), times as `TIMESTAMP'…'`, integers as digits.

use std::fmt::Write;
use std::time::Duration;

use super::Statements;
use crate::sql::SqlValue;
use lock_core::{Lease, LockRequest};

/// The OK packets of a batch text: one for `START TRANSACTION`, one per statement, one for
/// `COMMIT`.
pub const BATCH_EXTRA_PACKETS: usize = 2;

impl Statements {
    /// One text query deciding every request of `requests` in the order given (callers sort
    /// them by name): `START TRANSACTION`, the acquire statement of each, `COMMIT`. The OK
    /// packet of the `i`-th acquire (packet `i + 1`) is read by
    /// [`acquire_outcome`](Self::acquire_outcome) as alone.
    ///
    /// ```
    /// use lock_sql::LockTableConfig;
    /// use lock_sql::sql::mysql::{Shape, Statements, Table};
    /// use lock_core::testkit::request;
    /// use std::time::Duration;
    ///
    /// let table = Table::new(&LockTableConfig::default())?;
    /// let statements = Statements::new(&table, Shape { extended: true, zone_sensitive: false });
    /// let a = request(&"a".into(), "me", Duration::from_secs(30), None);
    /// let text = statements.acquire_batch(&[&a]);
    /// assert!(text.starts_with("START TRANSACTION;") && text.ends_with("COMMIT"));
    /// assert!(!text.contains('?'));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn acquire_batch(&self, requests: &[&LockRequest]) -> String {
        batch(requests.iter().map(|request| self.acquire(request)))
    }

    /// One text query releasing every lease of `leases` in the order given (callers sort them
    /// by name), in one transaction; packet `i + 1` is the `i`-th release's, `last_insert_id`
    /// 1 when it was still the holder's.
    pub fn release_batch(&self, leases: &[(&Lease, Duration)]) -> String {
        batch(
            leases
                .iter()
                .map(|(lease, at_least)| self.release(lease, *at_least)),
        )
    }
}

fn batch<'a>(statements: impl Iterator<Item = (&'a str, Vec<SqlValue>)>) -> String {
    let mut text = String::from("START TRANSACTION;");
    for (statement, params) in statements {
        let mut params = params.iter();
        for (i, part) in statement.split('?').enumerate() {
            if i > 0 {
                match params.next() {
                    Some(value) => literal(&mut text, value),
                    None => text.push('?'),
                }
            }
            text.push_str(part);
        }
        text.push(';');
    }
    text.push_str("COMMIT");
    text
}

fn literal(text: &mut String, value: &SqlValue) {
    match value {
        SqlValue::Text(s) if s.is_empty() => text.push_str("''"),
        SqlValue::Text(s) => {
            text.push_str("_utf8mb4 X'");
            for byte in s.as_bytes() {
                let _ = write!(text, "{byte:02X}");
            }
            text.push('\'');
        }
        SqlValue::Int(n) => {
            let _ = write!(text, "{n}");
        }
        SqlValue::Timestamp(None) => text.push_str("NULL"),
        SqlValue::Timestamp(Some(at)) => {
            let _ = write!(text, "TIMESTAMP'{}'", at.format("%Y-%m-%d %H:%M:%S%.3f"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_need_no_escaping() {
        let mut text = String::new();
        literal(&mut text, &SqlValue::Text("a'b\\".into()));
        assert_eq!(text, "_utf8mb4 X'6127625C'");
        text.clear();
        let at = chrono::DateTime::from_timestamp_millis(1_700_000_000_123)
            .unwrap()
            .naive_utc();
        literal(&mut text, &SqlValue::Timestamp(Some(at)));
        assert_eq!(text, "TIMESTAMP'2023-11-14 22:13:20.123'");
    }
}
