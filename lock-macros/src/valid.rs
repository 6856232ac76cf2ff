//! What can be checked at compile time is checked here: the function's shape, cron syntax,
//! zones, durations, integers in a range, strings from a fixed list, and how the arguments
//! combine. Values are parsed with `lock_trigger`, the parser the runtime uses, so whatever
//! compiles is what the scheduler accepts.

use std::time::Duration;

use proc_macro2::TokenStream;
use syn::{FnArg, GenericArgument, LitStr, PathArguments, ReturnType, Signature, Type};

use crate::args::{Args, Given, Value};
use crate::errors::Errors;
use crate::keys::{Macro, Role, ValueKind};
use crate::values::{Checked, Values};

mod runs;

pub(crate) use runs::direct_call_keys;

/// When a `#[scheduled]` function fires, checked: the `TriggerKind` expression and the other
/// `TriggerSpec` fields given.
pub(crate) struct Trigger {
    pub(crate) kind: TokenStream,
    pub(crate) fields: Vec<TokenStream>,
    /// The lock name, when `#[scheduled]` carries it.
    pub(crate) name: Option<LitStr>,
    /// How each slot's work is spread (`shards`, `broadcast`).
    pub(crate) distribution: crate::distribution::Spread,
    /// The parents of an `after` trigger; empty for the others.
    pub(crate) after: Vec<LitStr>,
    /// The concurrency group (`group`).
    pub(crate) group: Option<LitStr>,
}

/// How calls are locked, checked: the `LockSpec` fields given; the rest take their defaults.
pub(crate) struct Lock {
    /// `None`: not given here (`#[scheduled]` may carry it).
    pub(crate) name: Option<LitStr>,
    pub(crate) fields: Vec<TokenStream>,
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
             on; to reach a service object, register it on the builder with \
             `.state(Arc::new(service))` and take `State(service): State<Arc<Service>>` as a \
             parameter of an associated function without `self`"
        } else {
            "#[scheduler_lock] cannot lock a method taking `self`: the lock is named per \
             function, not per value, so calls on different values would exclude each other in \
             every instance; lock a free function or an associated function without `self`, or \
             call `LockingTaskExecutor::execute_with_lock` with a lock name that identifies the value"
        };
        errors.on(receiver, message);
    } else if scheduled {
        parameters(sig, errors);
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

/// A `#[scheduled]` function's parameters are extractors, owned values the scheduler builds
/// at each fire: whether each type is one is checked by the compiler (`FromJob`), the shapes
/// that never are, here.
fn parameters(sig: &Signature, errors: &mut Errors) {
    for arg in &sig.inputs {
        let FnArg::Typed(arg) = arg else { continue };
        match strip_groups(&arg.ty) {
            Type::Reference(reference) => errors.on(
                reference,
                "a #[scheduled] function cannot take a reference: the scheduler builds each \
                 parameter anew at each fire and hands it over; take `State<T>` by value (a \
                 clone per fire; share a large value as `State<Arc<T>>`) or `JobContext`",
            ),
            Type::ImplTrait(ty) => errors.on(
                ty,
                "a #[scheduled] function cannot take `impl Trait`: the scheduler builds each \
                 parameter from its type; take an extractor: `State<T>` for a value registered \
                 with `.state(value)`, `JobContext`, or a type implementing `scheduled_locks::scheduler::FromJob`",
            ),
            _ => {}
        }
    }
}

fn strip_groups(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => strip_groups(&group.elem),
        Type::Paren(paren) => strip_groups(&paren.elem),
        ty => ty,
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
pub(crate) fn trigger(args: &Args, errors: &mut Errors) -> Option<Trigger> {
    let triggers: Vec<&'static str> = Macro::Scheduled
        .keys()
        .filter(|key| matches!(key.role, Role::Trigger { .. }))
        .map(|key| key.name)
        .collect();
    // In table order: the first is the job's trigger, the others are reported.
    let mut given = triggers.iter().filter_map(|name| args.get(name));
    let first = given.next();
    match first {
        None if args.had_unknown_key => {}
        None => {
            let hints: Vec<String> = Macro::Scheduled
                .keys()
                .filter_map(|key| match key.role {
                    Role::Trigger { hint, .. } => Some(format!("`{hint}`")),
                    _ => None,
                })
                .collect();
            errors.on(
                &args.attr,
                format!(
                    "#[scheduled] needs a trigger: add one of {}",
                    one_of(&hints, "or")
                ),
            );
        }
        Some(first) => {
            let names: Vec<String> = triggers.iter().map(|name| format!("`{name}`")).collect();
            for extra in given {
                errors.at(
                    extra.ident.span(),
                    format!(
                        "`{}` and `{}` are both set, but a job has exactly one trigger; keep \
                         one of {}",
                        extra.ident,
                        first.ident,
                        one_of(&names, "and")
                    ),
                );
            }
        }
    }
    for key in Macro::Scheduled.keys() {
        if let (
            Role::TriggerOption {
                with,
                misuse,
                misuse_after,
                ..
            },
            Some(option),
            Some(first),
        ) = (&key.role, args.get(key.name), first)
            && !with.contains(&first.key.name)
        {
            let why = match first.key.name {
                "after" => misuse_after,
                _ => misuse,
            };
            errors.at(option.ident.span(), why);
        }
    }

    // Check every value given, so each bad one is reported, then build the trigger.
    let values = check_values(Macro::Scheduled, args, errors);
    let Role::Trigger { kind, .. } = first?.key.role else {
        return None;
    };
    let mut fields = Vec::new();
    for key in Macro::Scheduled.keys() {
        if let (
            Role::TriggerOption {
                field: Some(field), ..
            },
            true,
        ) = (&key.role, values.given(key.name))
        {
            fields.push(field(&values)?);
        }
    }
    let distribution = crate::distribution::check(args, &values, errors)?;
    let group = match values.given("group") {
        true => Some(values.string("group")?.clone()),
        false => None,
    };
    Some(Trigger {
        kind: kind(&values)?,
        fields,
        name: values.string("name").cloned(),
        distribution,
        after: values.names("after").map(<[_]>::to_vec).unwrap_or_default(),
        group,
    })
}

/// "a, b and c" (`word` = "and") or "a, b or c".
fn one_of(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}

/// Checks each value given to `attr`, in table order, recording each refusal.
fn check_values(attr: Macro, args: &Args, errors: &mut Errors) -> Values {
    let mut values = Values::default();
    for key in attr.keys() {
        let Some(given) = args.get(key.name) else {
            continue;
        };
        values.given.push(key.name);
        let checked = match (&key.value, &given.value) {
            (ValueKind::Bool, Some(Value::Bool(on))) => Some(Checked::Bool(on.value)),
            (ValueKind::Integer { min, max, zero }, Some(Value::Int(n))) => {
                integer(given, n, (*min, *max), *zero, errors).map(Checked::Integer)
            }
            (ValueKind::JobName { what, empty, .. }, Some(Value::Names { names, written })) => {
                job_names(given, names, written, (what, empty), errors).map(Checked::Names)
            }
            (ValueKind::JobName { what, empty, .. }, Some(Value::Str(name))) => {
                job_name(name, what, empty, errors).then(|| Checked::Str(name.clone()))
            }
            (ValueKind::Choice(choices), Some(Value::Str(text))) => {
                choice(given, text, choices, errors).then(|| Checked::Str(text.clone()))
            }
            // Missing, or not of the key's kind: reported by the parser.
            (_, None | Some(Value::Bool(_)) | Some(Value::Int(_)) | Some(Value::Names { .. }))
            | (ValueKind::Bool | ValueKind::Integer { .. }, Some(Value::Str(_))) => None,
            (ValueKind::Cron, Some(Value::Str(expr))) => {
                match lock_trigger::parse_cron(&expr.value()) {
                    Ok(_) => Some(Checked::Str(expr.clone())),
                    Err(e) => {
                        errors.at(expr.span(), lock_trigger::explain_cron(&expr.value(), &e));
                        None
                    }
                }
            }
            (ValueKind::Zone, Some(Value::Str(zone))) => {
                match lock_trigger::parse_zone(&zone.value()) {
                    Ok(_) => Some(Checked::Str(zone.clone())),
                    Err(e) => {
                        errors.at(zone.span(), e);
                        None
                    }
                }
            }
            (ValueKind::LockName, Some(Value::Str(name))) => {
                lock_name(name, errors).then(|| Checked::Str(name.clone()))
            }
            (ValueKind::Duration { zero }, Some(Value::Str(text))) => {
                duration(given, text, *zero, errors).map(Checked::Duration)
            }
        };
        if let Some(checked) = checked {
            values.checked.push((key.name, checked));
        }
    }
    values
}

/// Checks `#[scheduler_lock(...)]`: the name's length, each duration, `at_least <= at_most`,
/// that a retry plan fits in the lease without keep-alive, and that `pause_for` comes with
/// `pause_after_failures`.
pub(crate) fn lock(args: &Args, errors: &mut Errors) -> Option<Lock> {
    let values = check_values(Macro::SchedulerLock, args, errors);
    let plan_fits = runs::retry_plan(args, &values, errors);
    let breaker_whole = runs::breaker(args, errors);
    if let (Some(most), Some(least)) = (
        values.duration("lock_at_most_for"),
        values.duration("lock_at_least_for"),
    ) && lock_trigger::check_lease(most, least)
        == Err(lock_trigger::LeaseError::AtLeastExceedsAtMost)
    {
        let (most_lit, least_lit) = (
            written(args, "lock_at_most_for")?,
            written(args, "lock_at_least_for")?,
        );
        errors.at(
            least_lit.span(),
            lock_trigger::lease_conflict(&least_lit.value(), &most_lit.value()),
        );
        return None;
    }
    if !plan_fits || !breaker_whole {
        return None;
    }
    let mut fields = Vec::new();
    for key in Macro::SchedulerLock.keys() {
        if let (Role::Lock(Some(field)), true) = (&key.role, values.given(key.name)) {
            fields.push(field(&values)?);
        }
    }
    let name = match values.given("name") {
        true => Some(values.string("name")?.clone()),
        false => None,
    };
    Some(Lock { name, fields })
}

/// Where the lock's name was written: which attributes of the function carry `name`.
pub(crate) struct NameSites {
    /// `#[scheduled]` is on the function.
    pub(crate) scheduled: bool,
    /// `#[scheduler_lock]` is on the function.
    pub(crate) lock_attr: bool,
    /// The `name` keys given, in source order.
    pub(crate) given: Vec<(Macro, syn::Ident)>,
    /// An argument list was unreadable or had an unknown key (maybe a misspelled `name`):
    /// a missing name is then not reported on top.
    pub(crate) unsure: bool,
}

/// Every lock has an explicit name, written once: a name derived from where the function
/// lives would change when the function moves, and during a rolling deploy old and new
/// instances would then take different locks and run one slot twice.
pub(crate) fn name_sites(sites: &NameSites, func: &syn::Ident, errors: &mut Errors) {
    match sites.given.as_slice() {
        [] if sites.unsure => {}
        [] => {
            let fn_name = syn::ext::IdentExt::unraw(func).to_string();
            let add = match (sites.scheduled, sites.lock_attr) {
                (true, false) => format!(
                    "add `name = \"{fn_name}\"` to #[scheduled(..)], or put \
                     #[scheduler_lock(name = \"{fn_name}\")] next to it"
                ),
                (true, true) => format!(
                    "add `name = \"{fn_name}\"` to #[scheduler_lock(..)] (or to #[scheduled(..)])"
                ),
                (false, _) => format!("add `name = \"{fn_name}\"` to #[scheduler_lock(..)]"),
            };
            errors.at(
                func.span(),
                format!(
                    "a lock needs a stable `name`: {add}. The name must not change when the \
                     function moves or is renamed, or old and new instances take different locks \
                     during a deploy and one slot runs twice. Code that relied on the former \
                     default (the function's path, `<crate>::<module>::{fn_name}` as \
                     `module_path!()` gives it) keeps its locks by writing that path"
                ),
            );
        }
        [_] => {}
        [_, (second, ident), ..] => errors.at(
            ident.span(),
            format!(
                "`name` is set in both #[scheduled(..)] and #[scheduler_lock(..)]; a lock has one \
                 name: remove this one or the one in #[{}(..)]",
                second.other().name()
            ),
        ),
    }
}

/// The literal a string key was written with (for messages about two values at once).
fn written<'a>(args: &'a Args, key: &str) -> Option<&'a LitStr> {
    match &args.get(key)?.value {
        Some(Value::Str(lit)) => Some(lit),
        _ => None,
    }
}

/// The lock name, checked by the rule the runtime applies (`lock_trigger::check_lock_name`).
fn lock_name(name: &LitStr, errors: &mut Errors) -> bool {
    let max = lock_trigger::MAX_LOCK_NAME_LEN;
    let message = match lock_trigger::check_lock_name(&name.value()) {
        Ok(()) => return true,
        Err(lock_trigger::NameError::Empty) => {
            "the lock `name` must not be empty; write a name that stays the same when the \
             function is moved or renamed, e.g. the job's purpose: `name = \"sync_bill\"`"
                .to_owned()
        }
        Err(lock_trigger::NameError::TooLong { len }) => format!(
            "the lock `name` is {len} bytes, over the limit of {max} (the lock table's \
             `name` column is VARCHAR({max})); choose a shorter name"
        ),
        // Control and bidi characters, NUL, whitespace at the ends: the runtime's sentence,
        // which names the character by code point and byte offset.
        Err(other) => format!(
            "invalid lock `name`: {}; a name is shown on terminals and in logs, so write it \
             with visible characters only, e.g. `name = \"sync_bill\"`",
            other.reason()
        ),
    };
    errors.at(name.span(), message);
    false
}

/// A job's name (a parent in `after`, a `group`), checked by the rule `start()` applies
/// (`lock_trigger::check_job_name`): a job's name has no length limit of its own.
fn job_name(name: &LitStr, what: &str, empty: &str, errors: &mut Errors) -> bool {
    let message = match lock_trigger::check_job_name(&name.value()) {
        Ok(()) => return true,
        Err(lock_trigger::NameError::Empty) => empty.to_owned(),
        // The runtime's sentence, which names the character by code point and byte offset.
        Err(other) => format!(
            "invalid {what} `{}`: {}; a name is shown on terminals and in logs, so write it \
             with visible characters only",
            name.value().escape_debug(),
            other.reason()
        ),
    };
    errors.at(name.span(), message);
    false
}

/// The names of a list key (`after`): at least one, each a job's name, none twice. Every
/// mistake is reported, each at its literal.
fn job_names(
    given: &Given,
    names: &[LitStr],
    written: &syn::Expr,
    (what, empty): (&str, &str),
    errors: &mut Errors,
) -> Option<Vec<LitStr>> {
    let key = &given.ident;
    if names.is_empty() {
        errors.on(
            written,
            format!(
                "`{key}` names no job: give the job (or jobs) this one runs after, e.g. `{}` or \
                 `{key} = [\"import_orders\", \"import_refunds\"]`",
                crate::keys::example(&key.to_string())
            ),
        );
        return None;
    }
    let mut ok = true;
    for (i, name) in names.iter().enumerate() {
        ok &= job_name(name, what, empty, errors);
        if names[..i]
            .iter()
            .any(|earlier| earlier.value() == name.value())
        {
            errors.at(
                name.span(),
                format!(
                    "`{}` is named twice in `{key}`; keep one",
                    name.value().escape_debug()
                ),
            );
            ok = false;
        }
    }
    ok.then(|| names.to_vec())
}

/// A duration in whole milliseconds (the precision of the lock table); zero refused with
/// `zero` as the reason, when given. The rules and messages are `lock_trigger`'s, which the
/// scheduler applies to values from configuration.
fn duration(
    given: &Given,
    lit: &LitStr,
    zero: Option<&str>,
    errors: &mut Errors,
) -> Option<Duration> {
    millis(&given.ident, lit, zero, errors).map(Duration::from_millis)
}

fn millis(key: &syn::Ident, lit: &LitStr, zero: Option<&str>, errors: &mut Errors) -> Option<u64> {
    match lock_trigger::check_duration(&key.to_string(), &lit.value(), zero) {
        // At most `MAX_DURATION`, so it fits in u64 milliseconds.
        Ok(duration) => Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
        Err(message) => {
            errors.at(lit.span(), message);
            None
        }
    }
}

/// An integer literal in `min..=max`; zero refused with `zero` as the reason, when given.
fn integer(
    given: &Given,
    lit: &syn::LitInt,
    (min, max): (u64, u64),
    zero: Option<&str>,
    errors: &mut Errors,
) -> Option<u64> {
    let key = &given.ident;
    if !lit.suffix().is_empty() {
        errors.at(
            lit.span(),
            format!(
                "`{key}` takes a plain integer, without a type suffix: write `{key} = {}`",
                lit.base10_digits()
            ),
        );
        return None;
    }
    match lit.base10_parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Some(n),
        parsed => {
            let why = match (parsed, zero) {
                (Ok(0), Some(why)) => format!(": {why}"),
                _ => String::new(),
            };
            errors.at(
                lit.span(),
                format!("`{key}` must be between {min} and {max}, found `{lit}`{why}"),
            );
            None
        }
    }
}

/// A string that must be one of `choices`; a near miss is named.
fn choice(given: &Given, lit: &LitStr, choices: &[&'static str], errors: &mut Errors) -> bool {
    let value = lit.value();
    if choices.contains(&value.as_str()) {
        return true;
    }
    let key = &given.ident;
    let valid = crate::args::list(choices);
    let message = match crate::args::closest(&value, choices) {
        Some(near) => format!(
            "unknown `{key}` value `{value}`; did you mean `{near}`? The values are {valid}"
        ),
        None => format!("unknown `{key}` value `{value}`; the values are {valid}"),
    };
    errors.at(lit.span(), message);
    false
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
        let message = lock_trigger::explain_cron("0 0 25 * * *", &error);
        assert!(message.contains("the hour field `25`"), "{message}");
        // Field-count errors keep the parser's own advice.
        let error = lock_trigger::parse_cron("* * * * *").unwrap_err();
        assert_eq!(
            lock_trigger::explain_cron("* * * * *", &error),
            error.to_string()
        );
    }

    fn duration(text: &str) -> Result<u64, String> {
        let key: syn::Ident = parse_quote!(fixed_rate);
        let lit = LitStr::new(text, proc_macro2::Span::call_site());
        let mut errors = Errors::default();
        let ms = millis(&key, &lit, None, &mut errors);
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
        let args = crate::args::parse(
            Macro::SchedulerLock,
            quote!(name = "", lock_at_most_for = "1m", lock_at_least_for = "2m"),
            quote!(#),
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
