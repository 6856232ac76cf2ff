//! What releasing a lock by hand risks: one text for `lockctl unlock` and the dashboard.

use lock_core::LockRecord;

/// Why releasing `record` by hand is dangerous, or that there is nothing to release: the
/// warning `lockctl unlock` prints before refusing without `--force`, and the dashboard shows
/// above its release button.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use lock_core::LockRecord;
///
/// let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
/// let record = LockRecord {
///     name: "report".into(),
///     lock_until: at,
///     locked_at: at,
///     locked_by: "host-a:17".into(),
///     fence: 3,
///     last_fire: None,
///     held: true,
/// };
/// assert_eq!(
///     lock_dashboard::unlock_warning(&record),
///     "it is held by host-a:17 until 2026-01-02T03:04:05.000Z, and its job may still be \
///      running:\n  releasing the lock lets another instance start the same job."
/// );
/// ```
pub fn unlock_warning(record: &LockRecord) -> String {
    if record.held {
        format!(
            "it is held by {} until {}, and its job may still be running:\n  \
             releasing the lock lets another instance start the same job.",
            record.locked_by,
            record.lock_until.format("%Y-%m-%dT%H:%M:%S%.3fZ")
        )
    } else {
        "it is not held: there is nothing to release.".to_owned()
    }
}
