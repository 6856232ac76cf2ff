//! The action log of [`InMemoryLockProvider`](lock_core::InMemoryLockProvider): kept apart from the
//! other in-memory tables (its own lock and ids), as the SQL stores keep it in a table of its
//! own.

use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use crate::ActionRecord;

/// The action log's rows, oldest first.
#[derive(Debug, Default)]
pub(crate) struct MemoryActionLog {
    rows: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    rows: Vec<ActionRecord>,
    next_id: i64,
}

impl MemoryActionLog {
    fn log(&self) -> MutexGuard<'_, Log> {
        // Every change is a push or a retain: a poisoned lock is still consistent.
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `action` at `now`, its texts cut to the columns' lengths.
    pub(crate) fn record(&self, action: &ActionRecord, now: DateTime<Utc>) {
        let (job, requested_by, detail) = action.truncated();
        let mut log = self.log();
        log.next_id += 1;
        let row = ActionRecord::read(
            log.next_id,
            now,
            job.to_owned(),
            action.action,
            requested_by.to_owned(),
            detail.map(str::to_owned),
        );
        log.rows.push(row);
    }

    /// The newest `limit` rows of `job`, newest first.
    pub(crate) fn of(&self, job: &str, limit: u32) -> Vec<ActionRecord> {
        self.log()
            .rows
            .iter()
            .rev()
            .filter(|row| row.job == job)
            .take(limit as usize)
            .cloned()
            .collect()
    }

    /// Deletes at most `limit` rows written before `before`, oldest first; returns how many.
    pub(crate) fn delete_before(&self, before: DateTime<Utc>, limit: usize) -> usize {
        let mut log = self.log();
        let mut left = limit;
        log.rows.retain(|row| {
            if row.at < before && left > 0 {
                left -= 1;
                false
            } else {
                true
            }
        });
        limit - left
    }
}
