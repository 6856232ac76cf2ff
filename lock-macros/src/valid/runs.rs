//! The checks of the keys that shape a scheduled run: retries, the timeout and the circuit
//! breaker.

use crate::args::{Args, Value};
use crate::errors::Errors;
use crate::values::Values;

/// `#[scheduler_lock]` without `#[scheduled]`: the keys only a scheduled run applies are
/// refused (a direct call's body is a future the caller made, run once).
pub(crate) fn direct_call_keys(args: &Args, errors: &mut Errors) {
    for key in crate::keys::SCHEDULED_RUN_KEYS {
        if let Some(given) = args.get(key) {
            errors.at(
                given.ident.span(),
                format!(
                    "`{key}` applies to the runs of a #[scheduled] job only: a direct call of a \
                     #[scheduler_lock] function runs its body once, as the caller wrote it; add \
                     #[scheduled(..)] or remove `{key}`"
                ),
            );
        }
    }
}

/// Without keep-alive, the pauses of a retry plan must end before the lease does (when
/// `lock_at_most_for` is written: a default one is the builder's to set, and `start()` checks
/// the plan against it). False when it does not (reported on `retries`).
pub(super) fn retry_plan(args: &Args, values: &Values, errors: &mut Errors) -> bool {
    let (Some(most), Some(retries), false) = (
        values.duration("lock_at_most_for"),
        values.integer("retries"),
        values.bool("keep_alive") == Some(true),
    ) else {
        return true;
    };
    let backoff = values
        .duration("retry_backoff")
        .unwrap_or(lock_trigger::DEFAULT_RETRY_BACKOFF);
    let retries = u32::try_from(retries).unwrap_or(u32::MAX);
    let Some(conflict) = lock_trigger::retry_plan_conflict(retries, backoff, most) else {
        return true;
    };
    let Some(given) = args.get("retries") else {
        return true;
    };
    let span = match &given.value {
        Some(Value::Int(lit)) => lit.span(),
        _ => given.ident.span(),
    };
    errors.at(span, conflict);
    false
}

/// `pause_for` is how long the circuit breaker pauses the job: without `pause_after_failures`
/// there is no breaker (a `Job` built in code cannot say one without the other either). False
/// when it is missing (reported on `pause_for`).
pub(super) fn breaker(args: &Args, errors: &mut Errors) -> bool {
    let (Some(pause_for), None) = (args.get("pause_for"), args.get("pause_after_failures")) else {
        return true;
    };
    errors.at(
        pause_for.ident.span(),
        "`pause_for` needs `pause_after_failures`: it is how long the circuit breaker pauses the \
         job, and without `pause_after_failures = N` the job has no breaker; add e.g. \
         `pause_after_failures = 3`, or remove `pause_for`",
    );
    false
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::errors::Errors;
    use crate::keys::Macro;

    fn lock_errors(tokens: proc_macro2::TokenStream) -> Vec<String> {
        let mut errors = Errors::default();
        let args = crate::args::parse(Macro::SchedulerLock, tokens, quote!(#), &mut errors)
            .expect("valid syntax");
        let lock = super::super::lock(&args, &mut errors);
        match errors.finish() {
            Ok(()) => {
                assert!(lock.is_some());
                Vec::new()
            }
            Err(all) => all.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_plan_longer_than_the_lease_is_reported_with_the_other_lease_mistakes() {
        let messages = lock_errors(quote!(
            name = "sync",
            lock_at_most_for = "1m",
            lock_at_least_for = "2m",
            retries = 3,
            retry_backoff = "10s"
        ));
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].contains("pause up to 1m 10s in all"),
            "{messages:?}"
        );
        assert!(messages[1].contains("is longer than"), "{messages:?}");
    }

    #[test]
    fn pause_for_needs_pause_after_failures_and_the_breaker_values_their_ranges() {
        let messages = lock_errors(quote!(name = "a", pause_for = "10m"));
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(
            messages[0].starts_with("`pause_for` needs `pause_after_failures`"),
            "{messages:?}"
        );
        // A refused count is reported as such, not as a missing breaker.
        let messages = lock_errors(quote!(
            name = "a",
            pause_after_failures = 0,
            pause_for = "0s"
        ));
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("found `0`: 0 failures would mean no circuit breaker"));
        assert!(messages[1].contains("`pause_for` must be greater than zero"));
        assert!(
            lock_errors(quote!(
                name = "a",
                overlap = "queue",
                pause_after_failures = 1000
            ))
            .is_empty()
        );
    }

    #[test]
    fn keep_alive_or_an_unwritten_lease_lets_any_plan_through() {
        assert!(
            lock_errors(quote!(
                name = "a",
                lock_at_most_for = "1m",
                keep_alive = true,
                retries = 3,
                retry_backoff = "10s"
            ))
            .is_empty()
        );
        assert!(lock_errors(quote!(name = "b", retries = 100, retry_backoff = "1h")).is_empty());
        assert!(
            lock_errors(quote!(
                name = "c",
                lock_at_most_for = "1m",
                retries = 2,
                retry_backoff = "10s"
            ))
            .is_empty()
        );
    }
}
