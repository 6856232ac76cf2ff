//! What can be checked at compile time is checked here: the function's shape, cron syntax,
//! zones, durations, and how the arguments combine. Values are parsed with `lock_trigger`, the
//! parser the runtime uses, so whatever compiles is what the scheduler accepts.

use syn::{GenericArgument, LitStr, PathArguments, ReturnType, Signature, Type};

use crate::args::{Arg, LockArgs, ScheduledArgs};
use crate::errors::Errors;

/// The longest lock name, in bytes (`lock_core::MAX_LOCK_NAME_LEN`: the lock table's `name`
/// column is `VARCHAR(64)`). Repeated here because lock-core depends on this crate.
pub(crate) const MAX_LOCK_NAME_LEN: usize = 64;

/// When a `#[scheduled]` function fires, checked.
pub(crate) enum Trigger {
    Cron {
        expr: LitStr,
        zone: Option<LitStr>,
    },
    FixedRate {
        period_ms: u64,
        initial_delay_ms: u64,
    },
    FixedDelay {
        delay_ms: u64,
        initial_delay_ms: u64,
    },
}

/// How calls are locked, checked; `None` fields take the executor's defaults at run time.
pub(crate) struct Lock {
    /// `None`: the function's path.
    pub(crate) name: Option<LitStr>,
    pub(crate) at_most_ms: Option<u64>,
    pub(crate) at_least_ms: u64,
    pub(crate) keep_alive: Option<bool>,
}

/// Checks the signature: the parts that cannot work with a lock (or, for `#[scheduled]`, with
/// a scheduler calling the function on its own) are reported with the reason.
pub(crate) fn signature(sig: &Signature, scheduled: bool, errors: &mut Errors) {
    if let Some(constness) = &sig.constness {
        errors.on(
            constness,
            "a locked function cannot be `const fn`: the lock is taken at run time, on each call; \
             remove `const`",
        );
    }
    if scheduled {
        if let Some(unsafety) = &sig.unsafety {
            errors.on(
                unsafety,
                "a #[scheduled] function cannot be `unsafe fn`: the scheduler calls it and cannot \
                 uphold a safety contract; make the function safe and put `unsafe` blocks inside",
            );
        }
        if let Some(abi) = &sig.abi {
            errors.on(
                abi,
                "a #[scheduled] function cannot have an `extern` ABI: the scheduler calls it as \
                 a Rust function; remove the `extern`, or schedule a Rust function that calls \
                 this one",
            );
        }
        if !sig.generics.params.is_empty() {
            errors.on(
                &sig.generics,
                "a #[scheduled] function cannot be generic: the scheduler calls it with no type \
                 arguments; schedule a non-generic function that calls the generic one with the \
                 types it needs",
            );
        }
    }
    if let Some(receiver) = sig.receiver() {
        let message = if scheduled {
            "a #[scheduled] function cannot take `self`: the scheduler has no value to call it \
             on; make it a free function or an associated function without `self`"
        } else {
            "#[scheduler_lock] cannot lock a method taking `self`: the lock is named per \
             function, not per value, so calls on different values would exclude each other in \
             every instance; lock a free function or an associated function without `self`, or \
             call `LockingTaskExecutor::execute_with_lock` with a lock name that identifies the value"
        };
        errors.on(receiver, message);
    } else if scheduled && !sig.inputs.is_empty() {
        errors.on(
            &sig.inputs,
            "a #[scheduled] function cannot take parameters: the scheduler calls it with none; \
             read what the job needs inside the body, or lock a function you call yourself with \
             #[scheduler_lock] alone",
        );
    }
    if let ReturnType::Type(_, ty) = &sig.output
        && !is_allowed_return(ty)
    {
        errors.on(
            ty,
            "a locked function must return `()` or `Result<(), E>` (for example \
             `anyhow::Result<()>` or `std::io::Result<()>`): when another instance holds the \
             lock the call is skipped, and a skipped call has no value to return",
        );
    }
}

/// `()`, or a path ending in `Result` whose first generic argument is `()`.
fn is_allowed_return(ty: &Type) -> bool {
    match ty {
        Type::Tuple(tuple) => tuple.elems.is_empty(),
        // Types passed through `macro_rules!` arrive wrapped in invisible groups.
        Type::Group(group) => is_allowed_return(&group.elem),
        Type::Paren(paren) => is_allowed_return(&paren.elem),
        Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else {
                return false;
            };
            let PathArguments::AngleBracketed(generics) = &last.arguments else {
                return false;
            };
            last.ident == "Result"
                && matches!(
                    generics.args.first(),
                    Some(GenericArgument::Type(Type::Tuple(unit))) if unit.elems.is_empty()
                )
        }
        _ => false,
    }
}

/// Checks `#[scheduled(...)]`: exactly one trigger, the keys that go with it, and each value.
pub(crate) fn trigger(args: &ScheduledArgs, errors: &mut Errors) -> Option<Trigger> {
    let kinds = [&args.cron, &args.fixed_rate, &args.fixed_delay];
    let mut given = kinds.iter().filter_map(|kind| kind.as_ref());
    let first = given.next();
    match first {
        None if args.had_unknown_key => {}
        None => errors.on(
            &args.attr,
            "#[scheduled] needs a trigger: add one of `cron = \"0 0 * * * *\"`, \
             `fixed_rate = \"5s\"` or `fixed_delay = \"5s\"`",
        ),
        Some(first) => {
            for extra in given {
                errors.at(
                    extra.key.span(),
                    format!(
                        "`{}` and `{}` are both set, but a job has exactly one trigger; keep \
                         one of `cron`, `fixed_rate` and `fixed_delay`",
                        extra.key, first.key
                    ),
                );
            }
        }
    }
    let is_cron = args.cron.is_some();
    if let (Some(zone), false, Some(_)) = (&args.zone, is_cron, first) {
        errors.at(
            zone.key.span(),
            "`zone` applies to `cron` only: `fixed_rate` and `fixed_delay` count elapsed time, \
             not wall-clock time; remove `zone`",
        );
    }
    if let (Some(delay), true) = (&args.initial_delay, is_cron) {
        errors.at(
            delay.key.span(),
            "`initial_delay` applies to `fixed_rate` and `fixed_delay` only: a cron job first \
             fires at the next time its expression matches; remove `initial_delay`",
        );
    }

    // Parse every value given, so each bad one is reported, then build the trigger.
    let cron = value(&args.cron).and_then(|expr| match lock_trigger::parse_cron(&expr.value()) {
        Ok(_) => Some(expr.clone()),
        Err(e) => {
            errors.at(expr.span(), explain_cron(&expr.value(), &e));
            None
        }
    });
    let zone = value(&args.zone).and_then(|zone| match lock_trigger::parse_zone(&zone.value()) {
        Ok(_) => Some(zone.clone()),
        Err(e) => {
            errors.at(zone.span(), e);
            None
        }
    });
    let fixed_rate = positive_millis(&args.fixed_rate, errors);
    let fixed_delay = positive_millis(&args.fixed_delay, errors);
    let initial_delay = millis(&args.initial_delay, errors);

    let initial_delay_ms = match (&args.initial_delay, initial_delay) {
        (Some(_), None) => return None,
        (_, delay) => delay.unwrap_or(0),
    };
    match first?.key.to_string().as_str() {
        "cron" => Some(Trigger::Cron {
            expr: cron?,
            zone: match &args.zone {
                Some(_) => Some(zone?),
                None => None,
            },
        }),
        "fixed_rate" => Some(Trigger::FixedRate {
            period_ms: fixed_rate?,
            initial_delay_ms,
        }),
        _ => Some(Trigger::FixedDelay {
            delay_ms: fixed_delay?,
            initial_delay_ms,
        }),
    }
}

/// Spring's cron fields and what each accepts.
const CRON_FIELDS: [(&str, &str); 6] = [
    ("second", "0-59"),
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31, `?`, `L`, `nW`"),
    ("month", "1-12 or JAN-DEC"),
    (
        "day-of-week",
        "0-7 (0 and 7 are Sunday) or SUN-SAT, `?`, `nL`, `n#k`",
    ),
];

/// The parser's message, plus which field it refused: the parser does not say, so each field
/// in turn is replaced by `*`; the one whose replacement makes the expression valid is it.
fn explain_cron(expr: &str, error: &lock_trigger::TriggerError) -> String {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.len() != CRON_FIELDS.len() || !error.message().starts_with("invalid cron expression")
    {
        // Wrong field count, macros, unsupported forms: the message already says what to do.
        return error.to_string();
    }
    let culprit = (0..fields.len()).find(|&i| {
        let mut fixed = fields.clone();
        fixed[i] = "*";
        lock_trigger::parse_cron(&fixed.join(" ")).is_ok()
    });
    match culprit {
        Some(i) => {
            let (name, accepts) = CRON_FIELDS[i];
            format!(
                "{}, in the {name} field `{}` (it accepts {accepts})",
                error.message().trim_end_matches('.'),
                fields[i]
            )
        }
        None => {
            let all = CRON_FIELDS
                .iter()
                .map(|(name, accepts)| format!("{name} {accepts}"))
                .collect::<Vec<_>>()
                .join("; ");
            format!(
                "{} (the fields are: {all})",
                error.message().trim_end_matches('.')
            )
        }
    }
}

/// Checks `#[scheduler_lock(...)]`: the name's length, each duration, and `at_least <= at_most`.
pub(crate) fn lock(args: &LockArgs, errors: &mut Errors) -> Option<Lock> {
    let name = value(&args.name).and_then(|name| {
        let len = name.value().len();
        if len == 0 {
            errors.at(
                name.span(),
                "the lock `name` must not be empty; remove `name` to use the function's path",
            );
            return None;
        }
        if len > MAX_LOCK_NAME_LEN {
            errors.at(
                name.span(),
                format!(
                    "the lock `name` is {len} bytes, over the limit of {MAX_LOCK_NAME_LEN} (the \
                     lock table's `name` column is VARCHAR({MAX_LOCK_NAME_LEN})); choose a \
                     shorter name"
                ),
            );
            return None;
        }
        Some(name.clone())
    });
    let at_most = positive_millis(&args.lock_at_most_for, errors);
    let at_least = millis(&args.lock_at_least_for, errors);
    if let (Some(most), Some(least)) = (at_most, at_least)
        && least > most
    {
        let (most_lit, least_lit) = (
            value(&args.lock_at_most_for)?,
            value(&args.lock_at_least_for)?,
        );
        errors.at(
            least_lit.span(),
            format!(
                "`lock_at_least_for = {:?}` is longer than `lock_at_most_for = {:?}`: a lease \
                     cannot be kept longer than it may last at most; lower `lock_at_least_for` \
                     or raise `lock_at_most_for`",
                least_lit.value(),
                most_lit.value()
            ),
        );
        return None;
    }
    // Any key given with a bad value has been reported; do not build a half-checked lock.
    let failed = |given: bool, parsed: bool| given && !parsed;
    if failed(args.name.is_some(), name.is_some())
        || failed(args.lock_at_most_for.is_some(), at_most.is_some())
        || failed(args.lock_at_least_for.is_some(), at_least.is_some())
        || failed(args.keep_alive.is_some(), value(&args.keep_alive).is_some())
    {
        return None;
    }
    Some(Lock {
        name,
        at_most_ms: at_most,
        at_least_ms: at_least.unwrap_or(0),
        keep_alive: value(&args.keep_alive).map(|b| b.value),
    })
}

/// The value of a key that was given with a value of the right kind.
fn value<T>(arg: &Option<Arg<T>>) -> Option<&T> {
    arg.as_ref().and_then(|arg| arg.value.as_ref())
}

/// A duration in whole milliseconds (the unit of the lock table and of the runtime's specs).
fn millis(arg: &Option<Arg<LitStr>>, errors: &mut Errors) -> Option<u64> {
    let arg = arg.as_ref()?;
    let lit = arg.value.as_ref()?;
    let text = lit.value();
    let duration = match lock_trigger::parse_duration(&text) {
        Ok(duration) => duration,
        Err(e) => {
            errors.at(lit.span(), e);
            return None;
        }
    };
    if duration.subsec_nanos() % 1_000_000 != 0 {
        errors.at(
            lit.span(),
            format!(
                "`{} = {text:?}` is finer than a millisecond: lock and trigger durations have \
                 millisecond precision; use whole milliseconds (`1ms` at least)",
                arg.key
            ),
        );
        return None;
    }
    match u64::try_from(duration.as_millis()) {
        Ok(ms) => Some(ms),
        Err(_) => {
            errors.at(
                lit.span(),
                format!(
                    "`{} = {text:?}` is too long to count in milliseconds",
                    arg.key
                ),
            );
            None
        }
    }
}

/// Like [`millis`], and zero is an error (a zero period, delay or lease makes no sense).
fn positive_millis(arg: &Option<Arg<LitStr>>, errors: &mut Errors) -> Option<u64> {
    let ms = millis(arg, errors)?;
    if ms == 0 {
        let arg = arg.as_ref()?;
        let why = match arg.key.to_string().as_str() {
            "lock_at_most_for" => "a lease of zero expires as it is taken",
            "fixed_rate" => "the job would fire continuously",
            _ => "the job would run back to back without pause",
        };
        errors.at(
            arg.value.as_ref()?.span(),
            format!("`{}` must be greater than zero: {why}", arg.key),
        );
        return None;
    }
    Some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;
    use syn::parse_quote;

    fn allowed(ty: Type) -> bool {
        is_allowed_return(&ty)
    }

    #[test]
    fn unit_and_result_of_unit_are_the_allowed_returns() {
        assert!(allowed(parse_quote!(())));
        assert!(allowed(parse_quote!(Result<(), String>)));
        assert!(allowed(parse_quote!(anyhow::Result<()>)));
        assert!(allowed(parse_quote!(::std::io::Result<()>)));
        assert!(!allowed(parse_quote!(u32)));
        assert!(!allowed(parse_quote!(Result<u32, String>)));
        assert!(!allowed(parse_quote!(Option<()>)));
        assert!(!allowed(parse_quote!(MyResult)));
        assert!(!allowed(parse_quote!(
            impl std::future::Future<Output = ()>
        )));
    }

    #[test]
    fn a_refused_cron_field_is_named() {
        let error = lock_trigger::parse_cron("0 0 25 * * *").unwrap_err();
        let message = explain_cron("0 0 25 * * *", &error);
        assert!(message.contains("the hour field `25`"), "{message}");
        // Field-count errors keep the parser's own advice.
        let error = lock_trigger::parse_cron("* * * * *").unwrap_err();
        assert_eq!(explain_cron("* * * * *", &error), error.to_string());
    }

    fn duration(text: &str) -> Result<u64, String> {
        let arg = Some(Arg {
            key: parse_quote!(fixed_rate),
            value: Some(LitStr::new(text, proc_macro2::Span::call_site())),
        });
        let mut errors = Errors::default();
        let ms = millis(&arg, &mut errors);
        errors.finish().map_err(|e| e.to_string())?;
        Ok(ms.expect("no error, so a value"))
    }

    #[test]
    fn durations_are_whole_milliseconds() {
        assert_eq!(duration("1h 30m"), Ok(5_400_000));
        assert_eq!(duration("250ms"), Ok(250));
        assert_eq!(duration("0s"), Ok(0));
        assert!(
            duration("500us")
                .unwrap_err()
                .contains("millisecond precision")
        );
        assert!(
            duration("5 minutes please")
                .unwrap_err()
                .contains("invalid duration")
        );
    }

    #[test]
    fn the_lock_checks_name_and_durations_together() {
        let mut errors = Errors::default();
        let args = crate::args::parse_lock(
            quote!(name = "", lock_at_most_for = "1m", lock_at_least_for = "2m"),
            &mut errors,
        )
        .unwrap();
        assert!(lock(&args, &mut errors).is_none());
        let messages: Vec<String> = errors
            .finish()
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("must not be empty"));
        assert!(messages[1].contains("is longer than `lock_at_most_for = \"1m\"`"));
    }
}
