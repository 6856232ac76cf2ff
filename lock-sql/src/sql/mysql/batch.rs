//! Batches for MySQL and MariaDB: many acquires (or releases) decided by a few set-based
//! statements in one round trip and one transaction, for any driver that can send several
//! statements in one text query.
//!
//! An acquire batch is, in one text:
//!
//! 1. `START TRANSACTION` and `SET @lock_batch_now = UTC_TIMESTAMP(3)`: the batch's now, read
//!    once, as the single statement reads its now once.
//! 2. One multi-row `INSERT ... ON DUPLICATE KEY UPDATE name = name`, its rows in name order:
//!    it locks every requested row in that order, and creates each missing one as the single
//!    statement writes a new row it does not grant (free at now, `locked_by` the requester,
//!    fence 0, no `last_fire`). An existing row keeps every value, so nothing is written for it.
//! 3. `SET @lock_batch_decided_at = ...`: the server's clock once every row is locked, the
//!    [`DECIDED_AT`](super::DECIDED_AT) of the batch.
//! 4. A `SELECT` of each request's decision code, computed by the single statement's own
//!    expression ([`decision`](super::decision)) on the locked row, the request's values and
//!    the batch's clock: the rows the driver reads, one per request.
//! 5. An `UPDATE` of the rows whose code is a grant, with the values the single statement
//!    writes for a grant. The rows are locked since step 2 and the clock is fixed, so the
//!    `UPDATE` decides what the `SELECT` decided, row for row.
//! 6. `COMMIT`.
//!
//! Decisions, and why:
//!
//! - **Set-based, not one statement per request.** The single acquire statement is about two
//!   kilobytes of expressions; a thousand of them cost the server about 100 µs each to parse
//!   and set up (measured on MariaDB 10.11: 160-240 ms for 1,000, against 3 ms for 1,000
//!   `DO 1`), while the same expression evaluated on 1,000 rows of one statement costs a few
//!   milliseconds. BENCHMARKS.md ("MariaDB set-based batch") has the numbers.
//! - **The request values travel as a `JSON_TABLE`** (MySQL 8, MariaDB 10.6: the servers the
//!   provider supports), typed by its column list: ordinal, slot, lead, lease length,
//!   `give_up_at`. Its text holds digits and the keys only, so it needs no escaping.
//! - **Names and instance ids travel as literals, picked with `ELT(ordinal, ...)`.** A literal
//!   is coercible, so `name = ELT(...)` compares under the name column's collation and uses its
//!   primary key, as the single statement's `name = ?` does, whatever the column's type
//!   (ShedLock's `VARCHAR` in any collation, or `VARBINARY`). A column of a derived table or a
//!   `JSON_TABLE` would carry a collation of its own and fail against the table's (or skip its
//!   index). Literals are written without any escaping that depends on the session's
//!   `sql_mode`: text as `_utf8mb4 X'…'` (hexadecimal, [`literal`](super::literal)).
//! - **The clock is two session variables**, set by `SET` (not assigned inside expressions,
//!   which MySQL 8 deprecates) and cleared again before `COMMIT`, so that both the `SELECT`
//!   and the `UPDATE` read the same now; a batch cut off midway leaves them set, and the next
//!   batch sets them before it reads them.
//! - **Rows are locked in name order by step 2 alone**, so two instances' batches cannot
//!   deadlock, and the `SELECT ... FOR UPDATE` of step 4 filters nothing: it keeps every row
//!   it reads locked under any isolation level (`READ COMMITTED` releases the locks of rows a
//!   locking read filters out).
//! - **A release batch** is `SELECT ... FOR UPDATE` of the rows by name, with whether each is
//!   still the lease's (the single release's owner check), then an `UPDATE` of those rows with
//!   the single release's new `lock_until`.

use std::fmt::{self, Write};
use std::time::Duration;

use super::decision::Operands;
use super::literal::text as literal;
use super::{DECIDED_AT, NOW, REFUSED, Statements};
use crate::{at_least_millis, fence_to_sql, lease_millis};
use lock_core::{AcquireOutcome, Lease, LockRequest};

/// The batch's now: `UTC_TIMESTAMP(3)` when the batch began.
const BATCH_NOW: &str = "@lock_batch_now";
/// The batch's [`DECIDED_AT`]: the server's clock once every row is locked.
const BATCH_DECIDED_AT: &str = "@lock_batch_decided_at";
/// The batch's clock as a one-row table `c` of typed columns (a session variable holds a
/// time as text).
const CLOCK: &str = "(SELECT CAST(@lock_batch_now AS DATETIME(3)) AS server_now, \
                     CAST(@lock_batch_decided_at AS DATETIME(6)) AS decided_at) AS c";

/// The parts of the batch texts that depend on the table and its shape only.
#[derive(Debug)]
pub(super) struct BatchSql {
    extended: bool,
    /// The table, quoted.
    table: String,
    /// The columns, quoted, unqualified.
    name: String,
    lock_until: String,
    locked_at: String,
    locked_by: String,
    fence: String,
    last_fire: String,
}

impl BatchSql {
    pub(super) fn new(
        extended: bool,
        table: String,
        [name, lock_until, locked_at, locked_by, fence, last_fire]: [String; 6],
    ) -> Self {
        BatchSql {
            extended,
            table,
            name,
            lock_until,
            locked_at,
            locked_by,
            fence,
            last_fire,
        }
    }

    /// `FROM` (or `UPDATE`) of a batch's statements after step 2: the requests `r` (each with
    /// its ordinal `r.i`), each joined with its lock row `t` through the primary key.
    ///
    /// `FORCE INDEX (PRIMARY)`: on a table of a few rows (or one whose statistics are not yet
    /// gathered) MariaDB otherwise scans it with a block join, and the locking read and the
    /// `UPDATE` then lock every row of the table, other instances' rows included: two batches
    /// deadlocked that way (`fault-tests` `clock_skew`). Through the key each statement locks
    /// only its own rows, already locked in name order by step 2.
    fn joined(&self, requests: &str, names: &str) -> String {
        format!(
            "{requests} STRAIGHT_JOIN {table} AS t FORCE INDEX (PRIMARY) ON t.{name} = {names}",
            table = self.table,
            name = self.name
        )
    }
}

/// An answer to a batch that no batch text of ours produces; nothing in it is taken as granted.
///
/// ```
/// use lock_sql::sql::mysql::UnexpectedBatchAnswer;
///
/// let error = UnexpectedBatchAnswer::new("2 rows for a batch of 3");
/// assert_eq!(error.to_string(), "2 rows for a batch of 3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnexpectedBatchAnswer(String);

impl UnexpectedBatchAnswer {
    /// An answer wrong in the way `what` says.
    pub fn new(what: impl Into<String>) -> Self {
        UnexpectedBatchAnswer(what.into())
    }
}

impl fmt::Display for UnexpectedBatchAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnexpectedBatchAnswer {}

impl Statements {
    /// One text query deciding every request of `requests` (callers sort them by name, the
    /// order the rows are locked in), in one transaction, each exactly as the single acquire
    /// statement decides it alone. Its only rows are `(ordinal, code)`, one per request, read
    /// by [`acquire_batch_outcomes`](Self::acquire_batch_outcomes).
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
        let b = &self.batch;
        let names = elt(requests.iter().map(|r| r.name.as_ref()));
        let requesters = elt(requests.iter().map(|r| r.locked_by.as_ref()));
        let mut text = format!("START TRANSACTION;SET {BATCH_NOW} = {NOW};");

        // Step 2: lock every row in the order given, creating the missing ones as the single
        // statement writes a new row it does not grant.
        let now = format!("CAST({BATCH_NOW} AS DATETIME(3))");
        let _ = write!(
            text,
            "INSERT INTO {} ({}, {}, {}, {}",
            b.table, b.name, b.lock_until, b.locked_at, b.locked_by
        );
        if b.extended {
            let _ = write!(text, ", {}, {}", b.fence, b.last_fire);
        }
        text.push_str(") VALUES ");
        for (i, request) in requests.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push('(');
            literal(&mut text, &request.name);
            let _ = write!(text, ", {now}, {now}, ");
            literal(&mut text, &request.locked_by);
            if b.extended {
                text.push_str(", 0, NULL");
            }
            text.push(')');
        }
        let _ = write!(text, " ON DUPLICATE KEY UPDATE {0} = {0};", b.name);
        let _ = write!(text, "SET {BATCH_DECIDED_AT} = {DECIDED_AT};");

        // Steps 4 and 5: the single statement's decision, on the locked rows.
        let column = |c: &str| format!("t.{c}");
        let (name, lock_until, locked_by, fence, last_fire) = (
            column(&b.name),
            column(&b.lock_until),
            column(&b.locked_by),
            column(&b.fence),
            column(&b.last_fire),
        );
        let decision = Operands {
            name: &name,
            lock_until: &lock_until,
            locked_by: &locked_by,
            fence: &fence,
            last_fire: &last_fire,
            requested_name: &names,
            requester: &requesters,
            slot: "r.slot",
            lead: "r.slot_lead",
            give_up_at: "r.give_up_at",
            now: "c.server_now",
            decided_at: "c.decided_at",
        };
        let code = if b.extended {
            decision.code_extended()
        } else {
            decision.code_shedlock()
        };
        let joined = b.joined(&acquire_requests(requests), &names);
        let _ = write!(
            text,
            "SELECT CAST(r.i AS SIGNED), CAST({code} AS SIGNED) FROM {CLOCK} STRAIGHT_JOIN {joined} \
             FOR UPDATE;"
        );
        // The values the single statement writes for a grant (its fence: the code).
        let _ = write!(
            text,
            "UPDATE {CLOCK} STRAIGHT_JOIN {joined} SET {locked_by} = {requesters}, \
             t.{} = c.server_now, ",
            b.locked_at
        );
        if b.extended {
            let _ = write!(
                text,
                "{fence} = GREATEST({fence}, 0) + 1, {last_fire} = COALESCE(r.slot, {last_fire}), "
            );
        }
        let _ = write!(
            text,
            "{lock_until} = c.server_now + INTERVAL r.at_most MICROSECOND WHERE {code} < {REFUSED};\
             SET {BATCH_NOW} = NULL, {BATCH_DECIDED_AT} = NULL;COMMIT"
        );
        text
    }

    /// The outcome of each request of an [`acquire_batch`](Self::acquire_batch) text from its
    /// rows `(ordinal, code)`, in the order of `requests` (the same slice the text was built
    /// from). An error when the rows are not one per request, or a code is not one the
    /// decision produces: the caller then takes no lock as granted.
    pub fn acquire_batch_outcomes(
        &self,
        requests: &[&LockRequest],
        rows: &[(i64, i64)],
    ) -> Result<Vec<AcquireOutcome>, UnexpectedBatchAnswer> {
        if rows.len() != requests.len() {
            return Err(UnexpectedBatchAnswer::new(format!(
                "{} rows for a batch of {} acquires",
                rows.len(),
                requests.len()
            )));
        }
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        for &(ordinal, code) in rows {
            let at = ordinal_index(ordinal, requests.len())?;
            let request = requests[at];
            let outcome = u64::try_from(code)
                .ok()
                .filter(|&code| code != 0)
                .and_then(|code| self.outcome_of_code(request, code))
                .ok_or_else(|| {
                    UnexpectedBatchAnswer::new(format!(
                        "decision code {code} for lock `{}`",
                        request.name
                    ))
                })?;
            if outcomes[at].replace(outcome).is_some() {
                return Err(UnexpectedBatchAnswer::new(format!(
                    "two rows for lock `{}`",
                    request.name
                )));
            }
        }
        // Every ordinal was seen once: as many rows as requests, none twice.
        Ok(outcomes.into_iter().flatten().collect())
    }

    /// One text query releasing every lease of `leases` (callers sort them by name), in one
    /// transaction, each exactly as the single release statement does alone. Its only rows
    /// are `(ordinal, 1 or 0)` for each lease whose row exists, 1 when the row was still the
    /// lease's; read by [`release_batch_outcomes`](Self::release_batch_outcomes).
    ///
    /// ```
    /// use lock_sql::LockTableConfig;
    /// use lock_sql::sql::mysql::{Shape, Statements, Table};
    /// use lock_core::{Lease, testkit::request};
    /// use std::time::Duration;
    ///
    /// let table = Table::new(&LockTableConfig::default())?;
    /// let statements = Statements::new(&table, Shape { extended: true, zone_sensitive: false });
    /// let lease = Lease::granted(&request(&"a".into(), "me", Duration::from_secs(30), None), 7);
    /// let text = statements.release_batch(&[(&lease, Duration::ZERO)]);
    /// assert!(text.starts_with("START TRANSACTION;") && text.ends_with("COMMIT"));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn release_batch(&self, leases: &[(&Lease, Duration)]) -> String {
        let b = &self.batch;
        let names = elt(leases.iter().map(|(lease, _)| lease.name()));
        let holders = elt(leases.iter().map(|(lease, _)| lease.locked_by()));
        let mut json = String::from("[");
        for (i, (lease, at_least)) in leases.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            let _ = write!(
                json,
                "{{\"f\":{},\"a\":{}}}",
                fence_to_sql(lease),
                at_least_millis(*at_least) * 1000
            );
        }
        json.push(']');
        let requests = format!(
            "JSON_TABLE('{json}', '$[*]' COLUMNS (i FOR ORDINALITY, fence BIGINT PATH '$.f', \
             at_least BIGINT PATH '$.a')) AS r"
        );
        // The single release's owner check; the name is the join's.
        let mut owner = format!("t.{} = {holders}", b.locked_by);
        if b.extended {
            let _ = write!(owner, " AND t.{} = r.fence", b.fence);
        }
        let at_least_end = format!("t.{} + INTERVAL r.at_least MICROSECOND", b.locked_at);
        let joined = b.joined(&requests, &names);
        format!(
            "START TRANSACTION;\
             SELECT CAST(r.i AS SIGNED), IF({owner}, 1, 0) FROM {joined} FOR UPDATE;\
             UPDATE {joined} SET t.{lock_until} = IF({at_least_end} > {NOW}, {at_least_end}, {NOW}) \
             WHERE {owner};COMMIT",
            lock_until = b.lock_until
        )
    }

    /// Whether each lease of a [`release_batch`](Self::release_batch) text was still the
    /// holder's (and so released), from its rows, in the order of the leases.
    ///
    /// ```
    /// # use lock_sql::LockTableConfig;
    /// # use lock_sql::sql::mysql::{Shape, Statements, Table};
    /// # let table = Table::new(&LockTableConfig::default())?;
    /// # let statements = Statements::new(&table, Shape { extended: true, zone_sensitive: false });
    /// // Three leases: the first's row was the lease's, the second's another's, no third row.
    /// let released = statements.release_batch_outcomes(3, &[(1, 1), (2, 0)])?;
    /// assert_eq!(released, [true, false, false]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release_batch_outcomes(
        &self,
        leases: usize,
        rows: &[(i64, i64)],
    ) -> Result<Vec<bool>, UnexpectedBatchAnswer> {
        let mut seen = vec![false; leases];
        let mut released = vec![false; leases];
        for &(ordinal, matched) in rows {
            let at = ordinal_index(ordinal, leases)?;
            if std::mem::replace(&mut seen[at], true) {
                return Err(UnexpectedBatchAnswer::new(format!(
                    "two rows for release {ordinal}"
                )));
            }
            released[at] = match matched {
                1 => true,
                0 => false,
                other => {
                    return Err(UnexpectedBatchAnswer::new(format!(
                        "owner check {other} for release {ordinal}"
                    )));
                }
            };
        }
        Ok(released)
    }
}

/// The requests' values as the `JSON_TABLE` `r`: ordinal `i` (from 1), `slot`, `slot_lead`
/// (`max_slot_lead`), `at_most`, `give_up_at`, each as the single statement's parameter. (Not
/// `lead`: a reserved word in MySQL 8.)
fn acquire_requests(requests: &[&LockRequest]) -> String {
    let mut json = String::from("[");
    for (i, request) in requests.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        let _ = write!(
            json,
            "{{\"l\":{},\"m\":{}",
            lease_millis(request.max_slot_lead) * 1000,
            lease_millis(request.lock_at_most_for) * 1000
        );
        // A missing key is SQL NULL (`NULL ON EMPTY`, the default).
        if let Some(slot) = request.slot {
            let _ = write!(json, ",\"s\":\"{}\"", json_time(slot.instant().naive_utc()));
        }
        if let Some(give_up_at) = request.give_up_at {
            let _ = write!(json, ",\"g\":\"{}\"", json_time(give_up_at.naive_utc()));
        }
        json.push('}');
    }
    json.push(']');
    format!(
        "JSON_TABLE('{json}', '$[*]' COLUMNS (i FOR ORDINALITY, slot DATETIME(6) PATH '$.s', \
         slot_lead BIGINT PATH '$.l', at_most BIGINT PATH '$.m', give_up_at DATETIME(6) PATH '$.g')) \
         AS r"
    )
}

/// A time as the single statement's parameter carries it: microseconds, UTC.
fn json_time(at: chrono::NaiveDateTime) -> impl fmt::Display {
    at.format("%Y-%m-%d %H:%M:%S%.6f")
}

/// `ELT(r.i, v1, v2, ...)`: the value of the request `r`, as a literal (coercible, like a
/// parameter); a single literal when every request has the same value.
fn elt<'a>(values: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut text = String::new();
    let first = values.clone().next().unwrap_or("");
    if values.clone().all(|value| value == first) {
        literal(&mut text, first);
        return text;
    }
    text.push_str("ELT(r.i");
    for value in values {
        text.push_str(", ");
        literal(&mut text, value);
    }
    text.push(')');
    text
}

/// The index of the 1-based `ordinal` among `len` requests.
fn ordinal_index(ordinal: i64, len: usize) -> Result<usize, UnexpectedBatchAnswer> {
    usize::try_from(ordinal)
        .ok()
        .filter(|&ordinal| (1..=len).contains(&ordinal))
        .map(|ordinal| ordinal - 1)
        .ok_or_else(|| UnexpectedBatchAnswer::new(format!("ordinal {ordinal} in a batch of {len}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_for_all_is_one_literal() {
        assert_eq!(elt(["ab", "ab"].into_iter()), "_utf8mb4 X'6162'");
        assert_eq!(
            elt(["a", "b", "c"].into_iter()),
            "ELT(r.i, _utf8mb4 X'61', _utf8mb4 X'62', _utf8mb4 X'63')"
        );
    }

    #[test]
    fn ordinals_are_one_based_and_bounded() {
        assert_eq!(ordinal_index(1, 2), Ok(0));
        assert_eq!(ordinal_index(2, 2), Ok(1));
        assert!(ordinal_index(0, 2).is_err());
        assert!(ordinal_index(3, 2).is_err());
        assert!(ordinal_index(-1, 2).is_err());
    }
}
