//! The keys of the two attributes, as data: one row per key says which attribute takes it, what
//! its value is, how it is written (for error messages) and what it becomes in the expansion.
//! Parsing, duplicate detection, the unknown-key message ("did you mean", the list of valid
//! keys), the trigger rules and the emitted `TriggerSpec` / `LockSpec` all read this table.
//!
//! A new key is a row here (and, if it is new vocabulary, a field or variant in `lock-trigger`).

use std::time::Duration;

use proc_macro2::TokenStream;
use quote::quote;

use crate::root::PRIVATE;
use crate::values::Values;

/// Which attribute a key belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Macro {
    Scheduled,
    SchedulerLock,
}

impl Macro {
    /// The attribute's name, as users write it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Macro::Scheduled => "scheduled",
            Macro::SchedulerLock => "scheduler_lock",
        }
    }

    /// The other attribute (a key of one written in the other gets "belongs in #[..]").
    pub(crate) fn other(self) -> Macro {
        match self {
            Macro::Scheduled => Macro::SchedulerLock,
            Macro::SchedulerLock => Macro::Scheduled,
        }
    }

    /// This attribute's keys, in table order.
    pub(crate) fn keys(self) -> impl Iterator<Item = &'static Key> {
        KEYS.iter().filter(move |key| key.attr == self)
    }

    /// This attribute's key names, in table order.
    pub(crate) fn key_names(self) -> Vec<&'static str> {
        self.keys().map(|key| key.name).collect()
    }
}

/// What a key's value is, and so how it is checked (`valid::check_values`).
pub(crate) enum ValueKind {
    /// A string: a Spring cron expression.
    Cron,
    /// A string: an IANA zone name.
    Zone,
    /// A string: a lock name.
    LockName,
    /// A job's name (`lock_trigger::check_job_name`, the rule `start()` applies), or with
    /// `list` a string or a list of them (`["a", "b"]`), none twice. `what` names the value in
    /// messages; `empty` is the message for an empty one.
    JobName {
        what: &'static str,
        empty: &'static str,
        list: bool,
    },
    /// A string: a `humantime` or ISO-8601 (`PT30M`) duration, whole milliseconds. `zero` says why zero is refused
    /// (`None`: zero is allowed).
    Duration { zero: Option<&'static str> },
    /// `true` or `false`.
    Bool,
    /// An integer literal in `min..=max`; `zero` says why zero is refused, when it is and the
    /// range alone would not say why.
    Integer {
        min: u64,
        max: u64,
        zero: Option<&'static str>,
    },
    /// A string that must be one of these values.
    Choice(&'static [&'static str]),
}

/// How a value is written: which literal the parser expects.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Literal {
    Str,
    /// A string, or a list of strings in brackets.
    StrList,
    Bool,
    Int,
}

impl ValueKind {
    /// The literal the value is written as.
    pub(crate) fn literal(&self) -> Literal {
        match self {
            ValueKind::Bool => Literal::Bool,
            ValueKind::Integer { .. } => Literal::Int,
            ValueKind::JobName { list: true, .. } => Literal::StrList,
            _ => Literal::Str,
        }
    }
}

/// Emits a piece of the expansion from the checked values; `None` when a value it needs was
/// refused (and so reported already).
pub(crate) type Emit = fn(&Values) -> Option<TokenStream>;

/// What a key does.
pub(crate) enum Role {
    /// Chooses the trigger (a job has exactly one): `kind` emits its `TriggerKind`; `hint` is
    /// how it is suggested when no trigger is given.
    Trigger { kind: Emit, hint: &'static str },
    /// An option of the triggers named in `with`; `misuse` is the error when the job's trigger
    /// is another clock trigger, `misuse_after` when it is `after` (which no option goes with:
    /// a dependent job has no clock of its own). `field` emits a `TriggerSpec` field (`None`:
    /// the trigger's `kind` reads the value).
    TriggerOption {
        with: &'static [&'static str],
        misuse: &'static str,
        misuse_after: &'static str,
        field: Option<Emit>,
    },
    /// A field of the registration itself (`ScheduledJob`), which the expansion emits:
    /// `group`.
    Registration,
    /// A `LockSpec` field (`None`: the expansion emits it: `name`, which either attribute may
    /// carry).
    Lock(Option<Emit>),
}

/// One accepted key.
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) attr: Macro,
    pub(crate) value: ValueKind,
    /// How the key is written, for "e.g." in error messages.
    pub(crate) example: &'static str,
    pub(crate) role: Role,
}

/// Every accepted key. The order is the order of the lists in error messages, and the order in
/// which values are checked (so errors come out in it).
pub(crate) const KEYS: [Key; 23] = [
    Key {
        name: "cron",
        attr: Macro::Scheduled,
        value: ValueKind::Cron,
        example: "cron = \"0 */5 * * * *\"",
        role: Role::Trigger {
            kind: |values| {
                let expr = values.string("cron")?;
                let zone = match values.given("zone") {
                    true => {
                        let zone = values.string("zone")?;
                        quote!(::core::option::Option::Some(#zone))
                    }
                    false => quote!(::core::option::Option::None),
                };
                Some(quote! {
                    #PRIVATE::TriggerKind::Cron(#PRIVATE::CronSpec {
                        expr: #expr,
                        zone: #zone,
                    })
                })
            },
            hint: "cron = \"0 0 * * * *\"",
        },
    },
    Key {
        name: "zone",
        attr: Macro::Scheduled,
        value: ValueKind::Zone,
        example: "zone = \"Europe/Berlin\"",
        role: Role::TriggerOption {
            with: &["cron"],
            misuse: "`zone` applies to `cron` only: `fixed_rate` and `fixed_delay` count elapsed \
                     time, not wall-clock time; remove `zone`",
            misuse_after: "`zone` applies to `cron` only: an `after` job has no clock of its \
                           own, it runs when its parents succeed, with their slot; give the zone \
                           to the parent's `cron`, or remove `zone`",
            field: None,
        },
    },
    Key {
        name: "fixed_rate",
        attr: Macro::Scheduled,
        value: ValueKind::Duration {
            zero: Some("the job would fire continuously"),
        },
        example: "fixed_rate = \"5s\"",
        role: Role::Trigger {
            kind: |values| {
                let period = duration(values.duration("fixed_rate")?);
                Some(quote!(#PRIVATE::TriggerKind::FixedRate { period: #period }))
            },
            hint: "fixed_rate = \"5s\"",
        },
    },
    Key {
        name: "fixed_delay",
        attr: Macro::Scheduled,
        value: ValueKind::Duration {
            zero: Some("the job would run back to back without pause"),
        },
        example: "fixed_delay = \"5s\"",
        role: Role::Trigger {
            kind: |values| {
                let delay = duration(values.duration("fixed_delay")?);
                Some(quote!(#PRIVATE::TriggerKind::FixedDelay { delay: #delay }))
            },
            hint: "fixed_delay = \"5s\"",
        },
    },
    // The parents are emitted as `ScheduledJob::after` (`expand`, which also refuses the job's
    // own name among them); the kind itself carries nothing.
    Key {
        name: "after",
        attr: Macro::Scheduled,
        value: ValueKind::JobName {
            what: "`after` parent",
            empty: "an `after` parent must not be empty: name the job this one runs after, \
                    e.g. `after = \"import_orders\"`",
            list: true,
        },
        example: "after = \"import_orders\"",
        role: Role::Trigger {
            kind: |values| {
                values.names("after")?;
                Some(quote!(#PRIVATE::TriggerKind::After))
            },
            hint: "after = \"parent_job\"",
        },
    },
    Key {
        name: "initial_delay",
        attr: Macro::Scheduled,
        value: ValueKind::Duration { zero: None },
        example: "initial_delay = \"1s\"",
        role: Role::TriggerOption {
            with: &["fixed_rate", "fixed_delay"],
            misuse: "`initial_delay` applies to `fixed_rate` and `fixed_delay` only: a cron job \
                     first fires at the next time its expression matches; remove `initial_delay`",
            misuse_after: "`initial_delay` applies to `fixed_rate` and `fixed_delay` only: an \
                           `after` job has no timer, it first runs when its parents first \
                           succeed; delay the parent, or remove `initial_delay`",
            field: Some(|values| {
                let delay = duration(values.duration("initial_delay")?);
                Some(quote!(initial_delay: #delay))
            }),
        },
    },
    Key {
        name: "misfire",
        attr: Macro::Scheduled,
        value: ValueKind::Choice(lock_trigger::MISFIRE_POLICIES),
        example: "misfire = \"fire_once\"",
        role: Role::TriggerOption {
            with: &["cron", "fixed_rate"],
            misuse: MISFIRE_MISUSE,
            misuse_after: MISFIRE_MISUSE_AFTER,
            field: Some(|values| {
                let policy = match values.string("misfire")?.value().as_str() {
                    "fire_once" => quote!(FireOnce),
                    "catch_up" => quote!(CatchUp),
                    _ => quote!(Skip),
                };
                Some(quote!(misfire: #PRIVATE::lock_trigger::MisfirePolicy::#policy))
            }),
        },
    },
    Key {
        name: "misfire_grace",
        attr: Macro::Scheduled,
        value: ValueKind::Duration {
            zero: Some("no missed slot could ever run"),
        },
        example: "misfire_grace = \"1h\"",
        role: Role::TriggerOption {
            with: &["cron", "fixed_rate"],
            misuse: MISFIRE_MISUSE,
            misuse_after: MISFIRE_MISUSE_AFTER,
            field: Some(|values| {
                let grace = duration(values.duration("misfire_grace")?);
                Some(quote!(misfire_grace: ::core::option::Option::Some(#grace)))
            }),
        },
    },
    Key {
        name: "misfire_max",
        attr: Macro::Scheduled,
        value: ValueKind::Integer {
            min: 1,
            max: lock_trigger::MAX_MISFIRE_MAX as u64,
            zero: None,
        },
        example: "misfire_max = 10",
        role: Role::TriggerOption {
            with: &["cron", "fixed_rate"],
            misuse: MISFIRE_MISUSE,
            misuse_after: MISFIRE_MISUSE_AFTER,
            field: Some(|values| {
                let max = u32::try_from(values.integer("misfire_max")?).ok()?;
                Some(quote!(misfire_max: #max))
            }),
        },
    },
    // How a slot's work is spread (`crate::distribution` checks the two together and emits
    // `ScheduledJob::distribution`).
    Key {
        name: "shards",
        attr: Macro::Scheduled,
        value: ValueKind::Integer {
            min: 1,
            max: lock_trigger::MAX_SHARDS as u64,
            zero: None,
        },
        example: "shards = 4",
        role: Role::TriggerOption {
            with: &["cron", "fixed_rate"],
            misuse: "`shards` applies to `cron` and `fixed_rate` only: each shard runs once per \
                     slot, and a `fixed_delay` job has no slots; use `fixed_rate`, or remove \
                     `shards`",
            misuse_after: "`shards` applies to `cron` and `fixed_rate` only: an `after` job \
                           runs once for each success of its parents, not once per shard of a \
                           slot of its own; shard the parent, or remove `shards`",
            field: None,
        },
    },
    Key {
        name: "broadcast",
        attr: Macro::Scheduled,
        value: ValueKind::Bool,
        example: "broadcast = true",
        role: Role::TriggerOption {
            with: &["cron", "fixed_rate"],
            misuse: "`broadcast` applies to `cron` and `fixed_rate` only: each instance's rank \
                     runs once per slot, and a `fixed_delay` job has no slots; use \
                     `fixed_rate`, or remove `broadcast`",
            misuse_after: "`broadcast` applies to `cron` and `fixed_rate` only: an `after` \
                           job runs once for each success of its parents, not once per \
                           instance; remove `broadcast`",
            field: None,
        },
    },
    Key {
        name: "group",
        attr: Macro::Scheduled,
        value: ValueKind::JobName {
            what: "`group` name",
            empty: "the `group` name must not be empty: name the concurrency group whose \
                    `group_limit` the job's runs count against, e.g. `group = \"reports\"`, or \
                    remove `group`",
            list: false,
        },
        example: "group = \"reports\"",
        role: Role::Registration,
    },
    // `#[scheduled]` alone names its lock here (`expand` takes the name from whichever of the
    // two attributes has it, and refuses it in both or in neither).
    Key {
        name: "name",
        attr: Macro::Scheduled,
        value: ValueKind::LockName,
        example: "name = \"sync_bill\"",
        role: Role::Lock(None),
    },
    Key {
        name: "name",
        attr: Macro::SchedulerLock,
        value: ValueKind::LockName,
        example: "name = \"sync_bill\"",
        role: Role::Lock(None),
    },
    Key {
        name: "lock_at_most_for",
        attr: Macro::SchedulerLock,
        value: ValueKind::Duration {
            zero: Some(lock_trigger::ZERO_LEASE),
        },
        example: "lock_at_most_for = \"30m\"",
        role: Role::Lock(Some(|values| {
            let at_most = duration(values.duration("lock_at_most_for")?);
            Some(quote!(lock_at_most_for: ::core::option::Option::Some(#at_most)))
        })),
    },
    Key {
        name: "lock_at_least_for",
        attr: Macro::SchedulerLock,
        value: ValueKind::Duration { zero: None },
        example: "lock_at_least_for = \"10s\"",
        role: Role::Lock(Some(|values| {
            let at_least = duration(values.duration("lock_at_least_for")?);
            Some(quote!(lock_at_least_for: #at_least))
        })),
    },
    Key {
        name: "keep_alive",
        attr: Macro::SchedulerLock,
        value: ValueKind::Bool,
        example: "keep_alive = true",
        role: Role::Lock(Some(|values| {
            let on = values.bool("keep_alive")?;
            Some(quote!(keep_alive: ::core::option::Option::Some(#on)))
        })),
    },
    Key {
        name: "retries",
        attr: Macro::SchedulerLock,
        value: ValueKind::Integer {
            min: 0,
            max: lock_trigger::MAX_RETRIES as u64,
            zero: None,
        },
        example: "retries = 3",
        role: Role::Lock(Some(|values| {
            let retries = u32::try_from(values.integer("retries")?).ok()?;
            Some(quote!(retries: #retries))
        })),
    },
    Key {
        name: "retry_backoff",
        attr: Macro::SchedulerLock,
        value: ValueKind::Duration {
            zero: Some("the retries would hammer whatever made the run fail"),
        },
        example: "retry_backoff = \"10s\"",
        role: Role::Lock(Some(|values| {
            let backoff = duration(values.duration("retry_backoff")?);
            Some(quote!(retry_backoff: #backoff))
        })),
    },
    Key {
        name: "timeout",
        attr: Macro::SchedulerLock,
        value: ValueKind::Duration {
            zero: Some("every run would time out as it starts"),
        },
        example: "timeout = \"5m\"",
        role: Role::Lock(Some(|values| {
            let timeout = duration(values.duration("timeout")?);
            Some(quote!(timeout: ::core::option::Option::Some(#timeout)))
        })),
    },
    Key {
        name: "overlap",
        attr: Macro::SchedulerLock,
        value: ValueKind::Choice(lock_trigger::OVERLAP_POLICIES),
        example: "overlap = \"queue\"",
        role: Role::Lock(Some(|values| {
            let policy = match values.string("overlap")?.value().as_str() {
                "queue" => quote!(Queue),
                "replace" => quote!(Replace),
                _ => quote!(Skip),
            };
            Some(quote!(overlap: #PRIVATE::lock_trigger::Overlap::#policy))
        })),
    },
    // The circuit breaker (`valid::runs::breaker` refuses `pause_for` without it).
    Key {
        name: "pause_after_failures",
        attr: Macro::SchedulerLock,
        value: ValueKind::Integer {
            min: 1,
            max: lock_trigger::MAX_PAUSE_AFTER_FAILURES as u64,
            zero: Some(
                "0 failures would mean no circuit breaker, which leaving the key out gives; give \
                 the number of failed runs in a row that pauses the job, or remove \
                 `pause_after_failures`",
            ),
        },
        example: "pause_after_failures = 3",
        role: Role::Lock(Some(|values| {
            let failures = u32::try_from(values.integer("pause_after_failures")?).ok()?;
            Some(quote!(pause_after_failures: #failures))
        })),
    },
    Key {
        name: "pause_for",
        attr: Macro::SchedulerLock,
        value: ValueKind::Duration {
            zero: Some(
                "the circuit breaker would resume the job at once; leave `pause_for` out to have \
                 an operator resume it",
            ),
        },
        example: "pause_for = \"10m\"",
        role: Role::Lock(Some(|values| {
            let pause = duration(values.duration("pause_for")?);
            Some(quote!(pause_for: ::core::option::Option::Some(#pause)))
        })),
    },
];

/// Why the misfire keys are refused on a fixed-delay job.
const MISFIRE_MISUSE: &str = "a misfire policy applies to `cron` and `fixed_rate` only: a \
     `fixed_delay` job has no slots that could be missed, it runs again `fixed_delay` after \
     its last run ended; remove the misfire keys";

/// Why the misfire keys are refused on an `after` job.
const MISFIRE_MISUSE_AFTER: &str = "a misfire policy applies to `cron` and `fixed_rate` only: \
     an `after` job has no slots of its own that could be missed, it runs when its parents \
     succeed; set the misfire policy on the parent, or remove the misfire keys";

/// The keys of `#[scheduler_lock]` that only a scheduled run applies (a direct call runs its
/// body once, as written: no retries, no overlap policy, no circuit breaker).
pub(crate) const SCHEDULED_RUN_KEYS: [&str; 6] = [
    "retries",
    "retry_backoff",
    "timeout",
    "overlap",
    "pause_after_failures",
    "pause_for",
];

/// The row of `name` in `attr`, if it is one of its keys.
pub(crate) fn find(attr: Macro, name: &str) -> Option<&'static Key> {
    attr.keys().find(|key| key.name == name)
}

/// How `key` is written, for "e.g." in messages (any key, known or not).
pub(crate) fn example(key: &str) -> &'static str {
    KEYS.iter()
        .find(|row| row.name == key)
        .map_or("key = \"...\"", |row| row.example)
}

/// A checked duration (whole milliseconds) as a const expression.
fn duration(value: Duration) -> TokenStream {
    let ms = u64::try_from(value.as_millis()).unwrap_or(u64::MAX);
    quote!(::core::time::Duration::from_millis(#ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_unique_and_every_reference_names_a_trigger() {
        for (i, key) in KEYS.iter().enumerate() {
            assert!(
                KEYS[..i]
                    .iter()
                    .all(|other| other.name != key.name || other.attr != key.attr),
                "`{}` listed twice",
                key.name
            );
            assert!(key.example.starts_with(key.name), "{}", key.example);
            if let Role::TriggerOption { with, .. } = key.role {
                // `after` has no options: `misuse_after` is the message for each.
                assert!(!with.contains(&"after"), "{}", key.name);
                for trigger in with {
                    let row = find(key.attr, trigger).expect("a key of the same attribute");
                    assert!(matches!(row.role, Role::Trigger { .. }), "{trigger}");
                }
            }
        }
    }
}
