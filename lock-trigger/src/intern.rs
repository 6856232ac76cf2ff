//! Shared parsed schedules: every [`CronSchedule`](crate::CronSchedule) parsed from the same
//! expression shares one parsed [`Cron`] and one copy of the expression's text.
//!
//! Services build jobs at run time (one per tenant, per feed), often thousands with one
//! expression: parsed once, they cost a pointer each. The table holds weak references, so a
//! schedule dropped by every job is freed; dead entries are swept when the table has doubled
//! since the last sweep.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::{Cron, TriggerError};

#[derive(Default)]
struct Table {
    parsed: HashMap<Arc<str>, Weak<Cron>>,
    /// Entries after the last sweep: the next sweep comes at twice as many.
    swept_at: usize,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The expression's text and its parsed form, shared with every other schedule of the same
/// expression still alive; `parse` runs only when there is none.
pub(crate) fn intern(
    expr: &str,
    parse: impl FnOnce(&str) -> Result<Cron, TriggerError>,
) -> Result<(Arc<str>, Arc<Cron>), TriggerError> {
    let mut table = table().lock().unwrap_or_else(|p| p.into_inner());
    if let Some((text, cron)) = table
        .parsed
        .get_key_value(expr)
        .and_then(|(text, weak)| Some((text.clone(), weak.upgrade()?)))
    {
        return Ok((text, cron));
    }
    // Parsed under the lock: two threads parsing the same new expression at once still end
    // up sharing one.
    let cron = Arc::new(parse(expr)?);
    let text: Arc<str> = expr.into();
    table.parsed.insert(text.clone(), Arc::downgrade(&cron));
    if table.parsed.len() >= 2 * table.swept_at.max(64) {
        table.parsed.retain(|_, weak| weak.strong_count() > 0);
        table.swept_at = table.parsed.len();
    }
    Ok((text, cron))
}

#[cfg(test)]
mod tests {
    use crate::CronSchedule;

    #[test]
    fn one_expression_is_parsed_once() {
        let a = CronSchedule::parse("17 3 * * * *").unwrap();
        let b = CronSchedule::parse("17 3 * * * *")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap();
        let c = CronSchedule::parse("18 3 * * * *").unwrap();
        assert!(
            a.shares_parsed_form(&b),
            "the same expression shares one parsed form"
        );
        assert!(!a.shares_parsed_form(&c), "another expression has its own");
        assert_eq!(b.expr(), "17 3 * * * *");
    }

    #[test]
    fn an_invalid_expression_is_not_kept() {
        assert!(CronSchedule::parse("61 * * * * *").is_err());
        assert!(CronSchedule::parse("61 * * * * *").is_err());
    }
}
