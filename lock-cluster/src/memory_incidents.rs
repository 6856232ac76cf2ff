//! The incidents of [`InMemoryLockProvider`](lock_core::InMemoryLockProvider): one entry per
//! key, open or resolved, as the SQL stores keep one row per key in a table of their own.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use crate::{Incident, MAX_DETAIL_LEN, truncate};

/// The incidents by key.
#[derive(Debug, Default)]
pub(crate) struct MemoryIncidents {
    rows: Mutex<BTreeMap<String, Stored>>,
}

#[derive(Debug)]
struct Stored {
    summary: String,
    opened_at: DateTime<Utc>,
    resolved_at: Option<DateTime<Utc>>,
}

impl MemoryIncidents {
    fn rows(&self) -> MutexGuard<'_, BTreeMap<String, Stored>> {
        // Every change is one insert, assignment or retain: a poisoned lock is consistent.
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every open incident, oldest first (then by key).
    pub(crate) fn open(&self) -> Vec<Incident> {
        let mut open: Vec<Incident> = self
            .rows()
            .iter()
            .filter(|(_, row)| row.resolved_at.is_none())
            .map(|(key, row)| Incident {
                key: key.clone(),
                summary: row.summary.clone(),
                opened_at: row.opened_at,
            })
            .collect();
        open.sort_by(|a, b| (a.opened_at, &a.key).cmp(&(b.opened_at, &b.key)));
        open
    }

    /// Opens `key` at `now` unless it is open; true when it did.
    pub(crate) fn open_one(&self, key: &str, summary: &str, now: DateTime<Utc>) -> bool {
        let summary = truncate(summary, MAX_DETAIL_LEN).to_owned();
        let mut rows = self.rows();
        match rows.get_mut(key) {
            Some(row) if row.resolved_at.is_none() => false,
            Some(row) => {
                *row = Stored {
                    summary,
                    opened_at: now,
                    resolved_at: None,
                };
                true
            }
            None => {
                rows.insert(
                    key.to_owned(),
                    Stored {
                        summary,
                        opened_at: now,
                        resolved_at: None,
                    },
                );
                true
            }
        }
    }

    /// Resolves `key` at `now` if it is open; true when it did.
    pub(crate) fn resolve(&self, key: &str, now: DateTime<Utc>) -> bool {
        match self.rows().get_mut(key) {
            Some(row) if row.resolved_at.is_none() => {
                row.resolved_at = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Deletes at most `limit` incidents resolved before `before`; returns how many.
    pub(crate) fn delete_before(&self, before: DateTime<Utc>, limit: usize) -> usize {
        let mut left = limit;
        self.rows().retain(|_, row| {
            if row.resolved_at.is_some_and(|at| at < before) && left > 0 {
                left -= 1;
                false
            } else {
                true
            }
        });
        limit - left
    }
}
