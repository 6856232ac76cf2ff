//! What lockctl prints: tables padded to their widest cell, pretty JSON, instants to the
//! millisecond, and the lock rows in both forms. Every cell and every JSON text passes
//! `terminal.rs`, so a stored name cannot forge a row or send an escape sequence.

use chrono::{DateTime, Utc};
use lock_core::LockRecord;
use serde::Serialize;

use crate::terminal;

/// One lock as printed: the same fields in the table and in the JSON.
#[derive(Debug, Serialize)]
pub(crate) struct LockRow {
    name: String,
    /// `held` or `free`, by the database's clock.
    state: &'static str,
    locked_by: String,
    locked_at: String,
    lock_until: String,
    fence: u64,
    last_fire: Option<String>,
}

const HEADERS: [&str; 7] = [
    "NAME",
    "STATE",
    "LOCKED_BY",
    "LOCKED_AT",
    "LOCK_UNTIL",
    "FENCE",
    "LAST_FIRE",
];

/// UTC with milliseconds, the precision of the lock table's columns.
pub(crate) fn instant(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Rows as pretty-printed JSON, with a final newline.
pub(crate) fn pretty_json<T: Serialize>(rows: &T) -> String {
    // Serializing plain strings, numbers and booleans cannot fail.
    terminal::json(serde_json::to_string_pretty(rows).unwrap_or_default()) + "\n"
}

/// Columns padded to their widest cell, each cell escaped to one visible line.
pub(crate) fn text_table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|row| {
            row.iter()
                .map(|cell| terminal::visible(cell).into_owned())
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// A missing value as `-` in a table.
pub(crate) fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_owned())
}

impl From<&LockRecord> for LockRow {
    fn from(record: &LockRecord) -> Self {
        LockRow {
            name: record.name.clone(),
            state: if record.held { "held" } else { "free" },
            locked_by: record.locked_by.clone(),
            locked_at: instant(record.locked_at),
            lock_until: instant(record.lock_until),
            fence: record.fence,
            last_fire: record.last_fire.map(instant),
        }
    }
}

impl LockRow {
    fn cells(&self) -> [String; 7] {
        [
            terminal::visible(&self.name).into_owned(),
            self.state.to_owned(),
            terminal::visible(&self.locked_by).into_owned(),
            self.locked_at.clone(),
            self.lock_until.clone(),
            self.fence.to_string(),
            self.last_fire.clone().unwrap_or_else(|| "-".to_owned()),
        ]
    }
}

/// A table with a header line, columns two spaces apart, the fence right-aligned. Only the
/// header when there are no locks.
pub(crate) fn table(records: &[LockRecord]) -> String {
    const FENCE: usize = 5;
    let rows: Vec<[String; 7]> = records.iter().map(|r| LockRow::from(r).cells()).collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = HEADERS.map(str::to_owned);
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            if i == FENCE {
                line.push_str(&format!("{cell:>width$}"));
            } else {
                line.push_str(&format!("{cell:<width$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A JSON array of rows, pretty-printed, with a final newline.
pub(crate) fn json(records: &[LockRecord]) -> String {
    let rows: Vec<LockRow> = records.iter().map(LockRow::from).collect();
    let mut out =
        terminal::json(serde_json::to_string_pretty(&rows).expect("lock rows always serialize"));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn record(name: &str, held: bool, last_fire: bool) -> LockRecord {
        let at =
            Utc.with_ymd_and_hms(2026, 5, 1, 1, 5, 0).unwrap() + chrono::TimeDelta::milliseconds(7);
        LockRecord {
            name: name.to_owned(),
            lock_until: at + chrono::TimeDelta::minutes(30),
            locked_at: at,
            locked_by: "billing-1:4242:9f3a".to_owned(),
            fence: 12,
            last_fire: last_fire.then_some(at - chrono::TimeDelta::milliseconds(7)),
            held,
        }
    }

    #[test]
    fn the_table_aligns_columns_and_marks_missing_last_fire() {
        let text = table(&[record("sync_bill", true, true), record("x", false, false)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].starts_with("NAME       STATE  LOCKED_BY"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("sync_bill  held   billing-1:4242:9f3a  2026-05-01T01:05:00.007Z  2026-05-01T01:35:00.007Z     12  2026-05-01T01:05:00.000Z"),
            "{text}"
        );
        assert!(lines[2].starts_with("x          free"), "{text}");
        assert!(lines[2].ends_with("12  -"), "{text}");
    }

    #[test]
    fn an_empty_table_is_only_the_header() {
        assert_eq!(
            table(&[]),
            "NAME  STATE  LOCKED_BY  LOCKED_AT  LOCK_UNTIL  FENCE  LAST_FIRE\n"
        );
    }

    #[test]
    fn json_has_the_table_fields() {
        let value: serde_json::Value =
            serde_json::from_str(&json(&[record("sync_bill", true, false)])).unwrap();
        assert_eq!(
            value,
            serde_json::json!([{
                "name": "sync_bill",
                "state": "held",
                "locked_by": "billing-1:4242:9f3a",
                "locked_at": "2026-05-01T01:05:00.007Z",
                "lock_until": "2026-05-01T01:35:00.007Z",
                "fence": 12,
                "last_fire": null,
            }])
        );
    }
}
