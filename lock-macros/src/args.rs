//! The attribute arguments: `key = value` pairs, typed per key, each value kept with its span.
//!
//! Syntax is parsed first (`RawArgs`); then every pair is checked on its own (known key, set
//! once, value of the right kind), recording each mistake and going on, so a user sees all of
//! them at once. What the values mean (cron syntax, durations, combinations) is `valid.rs`.

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprLit, Ident, Lit, LitBool, LitStr, Token};

use crate::errors::Errors;

/// The keys of `#[scheduled(...)]`.
pub(crate) const SCHEDULED_KEYS: [&str; 5] =
    ["cron", "zone", "fixed_rate", "fixed_delay", "initial_delay"];

/// The keys of `#[scheduler_lock(...)]`.
pub(crate) const LOCK_KEYS: [&str; 4] = [
    "name",
    "lock_at_most_for",
    "lock_at_least_for",
    "keep_alive",
];

/// One argument as written: a key and, unless it is bare, a value of any expression kind (so
/// `keep_alive = "yes"` or `cron = 5` reach the type check instead of failing as syntax).
struct RawArg {
    key: Ident,
    value: Option<Expr>,
}

impl RawArg {
    fn parse(input: ParseStream<'_>, attr: Macro) -> syn::Result<Self> {
        // `peek_any`/`parse_any`: a keyword used as a key (`type = ..`) is an unknown key.
        if !input.peek(Ident::peek_any) {
            return Err(input.error(format!(
                "expected `key = value` arguments, e.g. #[{}({})]; the keys are {}",
                attr.name(),
                example(attr.keys()[0]),
                list(attr.keys())
            )));
        }
        let key = input.call(Ident::parse_any)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else if input.is_empty() || input.peek(Token![,]) {
            None
        } else {
            return Err(input.error(format!(
                "expected `=` after `{key}`, e.g. `{}`",
                example(&key.to_string())
            )));
        };
        Ok(RawArg { key, value })
    }
}

fn parse_raw(tokens: TokenStream, attr: Macro) -> syn::Result<Vec<RawArg>> {
    let parser = |input: ParseStream<'_>| {
        let mut args = Vec::new();
        while !input.is_empty() {
            args.push(RawArg::parse(input, attr)?);
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    };
    parser.parse2(tokens)
}

/// A key that was given, with its value. `value` is `None` when the value was missing or of
/// the wrong kind: that is already reported, and later checks treat the key as present so
/// that they do not report a second, misleading error (such as "no trigger").
pub(crate) struct Arg<T> {
    pub(crate) key: Ident,
    pub(crate) value: Option<T>,
}

/// Which attribute a set of arguments belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
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

    fn keys(self) -> &'static [&'static str] {
        match self {
            Macro::Scheduled => &SCHEDULED_KEYS,
            Macro::SchedulerLock => &LOCK_KEYS,
        }
    }

    fn other(self) -> Macro {
        match self {
            Macro::Scheduled => Macro::SchedulerLock,
            Macro::SchedulerLock => Macro::Scheduled,
        }
    }
}

/// `#[scheduled(...)]`.
pub(crate) struct ScheduledArgs {
    /// Where to report "no trigger": the attribute itself.
    pub(crate) attr: TokenStream,
    /// An unknown key was given (and reported): maybe a misspelled trigger, so a missing
    /// trigger is not reported on top.
    pub(crate) had_unknown_key: bool,
    pub(crate) cron: Option<Arg<LitStr>>,
    pub(crate) zone: Option<Arg<LitStr>>,
    pub(crate) fixed_rate: Option<Arg<LitStr>>,
    pub(crate) fixed_delay: Option<Arg<LitStr>>,
    pub(crate) initial_delay: Option<Arg<LitStr>>,
}

/// `#[scheduler_lock(...)]`; all keys optional.
#[derive(Default)]
pub(crate) struct LockArgs {
    pub(crate) name: Option<Arg<LitStr>>,
    pub(crate) lock_at_most_for: Option<Arg<LitStr>>,
    pub(crate) lock_at_least_for: Option<Arg<LitStr>>,
    pub(crate) keep_alive: Option<Arg<LitBool>>,
}

/// Parses `#[scheduled(...)]`'s arguments, recording every mistake in `errors`. `None` when
/// the arguments are not even `key = value` pairs.
pub(crate) fn parse_scheduled(
    tokens: TokenStream,
    attr: TokenStream,
    errors: &mut Errors,
) -> Option<ScheduledArgs> {
    let raw = parse_raw(tokens, Macro::Scheduled)
        .map_err(|e| errors.push(e))
        .ok()?;
    let mut args = ScheduledArgs {
        attr,
        had_unknown_key: false,
        cron: None,
        zone: None,
        fixed_rate: None,
        fixed_delay: None,
        initial_delay: None,
    };
    for arg in raw {
        let slot = match arg.key.to_string().as_str() {
            "cron" => &mut args.cron,
            "zone" => &mut args.zone,
            "fixed_rate" => &mut args.fixed_rate,
            "fixed_delay" => &mut args.fixed_delay,
            "initial_delay" => &mut args.initial_delay,
            _ => {
                unknown_key(Macro::Scheduled, &arg.key, errors);
                args.had_unknown_key = true;
                continue;
            }
        };
        let value = string_value(&arg, errors);
        set(slot, arg.key, value, errors);
    }
    Some(args)
}

/// Parses `#[scheduler_lock(...)]`'s arguments, recording every mistake in `errors`.
pub(crate) fn parse_lock(tokens: TokenStream, errors: &mut Errors) -> Option<LockArgs> {
    let raw = parse_raw(tokens, Macro::SchedulerLock)
        .map_err(|e| errors.push(e))
        .ok()?;
    let mut args = LockArgs::default();
    for arg in raw {
        let slot = match arg.key.to_string().as_str() {
            "name" => &mut args.name,
            "lock_at_most_for" => &mut args.lock_at_most_for,
            "lock_at_least_for" => &mut args.lock_at_least_for,
            "keep_alive" => {
                let value = bool_value(&arg, errors);
                set(&mut args.keep_alive, arg.key, value, errors);
                continue;
            }
            _ => {
                unknown_key(Macro::SchedulerLock, &arg.key, errors);
                continue;
            }
        };
        let value = string_value(&arg, errors);
        set(slot, arg.key, value, errors);
    }
    Some(args)
}

fn set<T>(slot: &mut Option<Arg<T>>, key: Ident, value: Option<T>, errors: &mut Errors) {
    if slot.is_some() {
        errors.at(
            key.span(),
            format!("`{key}` set twice; keep one of the two values"),
        );
        return;
    }
    *slot = Some(Arg { key, value });
}

fn unknown_key(attr: Macro, key: &Ident, errors: &mut Errors) {
    let valid = list(attr.keys());
    let other = attr.other();
    let written = key.to_string();
    let message = if other.keys().contains(&written.as_str()) {
        format!(
            "`{key}` belongs in #[{}(...)], not in #[{}(...)]; the keys here are {valid}",
            other.name(),
            attr.name()
        )
    } else if let Some(near) = closest(&written, attr.keys()) {
        format!(
            "unknown key `{key}` in #[{}(...)]; did you mean `{near}`? The valid keys are {valid}",
            attr.name()
        )
    } else {
        format!(
            "unknown key `{key}` in #[{}(...)]; the valid keys are {valid}",
            attr.name()
        )
    };
    errors.at(key.span(), message);
}

/// The key `written` was most likely meant to be: one that starts with it or is a few edits
/// away.
fn closest(written: &str, keys: &[&'static str]) -> Option<&'static str> {
    keys.iter()
        .map(|key| (edit_distance(written, key), *key))
        .filter(|(distance, key)| {
            *distance <= 2.max(key.len() / 3)
                || key.starts_with(written)
                || written.starts_with(key)
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, key)| key)
}

/// Levenshtein distance (keys are short ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// "`a`, `b`, `c`".
fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How each string-valued key is written, for "expects a string" messages.
fn example(key: &str) -> &'static str {
    match key {
        "cron" => "cron = \"0 */5 * * * *\"",
        "zone" => "zone = \"Europe/Berlin\"",
        "fixed_rate" => "fixed_rate = \"5s\"",
        "fixed_delay" => "fixed_delay = \"5s\"",
        "initial_delay" => "initial_delay = \"1s\"",
        "name" => "name = \"sync_bill\"",
        "lock_at_most_for" => "lock_at_most_for = \"30m\"",
        "lock_at_least_for" => "lock_at_least_for = \"10s\"",
        _ => "key = \"...\"",
    }
}

fn string_value(arg: &RawArg, errors: &mut Errors) -> Option<LitStr> {
    let key = &arg.key;
    match &arg.value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        })) => Some(s.clone()),
        Some(other) => {
            errors.on(
                other,
                format!(
                    "`{key}` expects a string literal, e.g. `{}`",
                    example(&key.to_string())
                ),
            );
            None
        }
        None => {
            errors.at(
                key.span(),
                format!(
                    "`{key}` needs a value, e.g. `{}`",
                    example(&key.to_string())
                ),
            );
            None
        }
    }
}

fn bool_value(arg: &RawArg, errors: &mut Errors) -> Option<LitBool> {
    let key = &arg.key;
    match &arg.value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        })) => Some(b.clone()),
        Some(other) => {
            errors.on(
                other,
                format!("`{key}` expects `true` or `false` (without quotes)"),
            );
            None
        }
        None => {
            errors.at(
                key.span(),
                format!("`{key}` needs a value: write `{key} = true` or `{key} = false`"),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn edit_distance_counts_insertions_deletions_substitutions() {
        assert_eq!(edit_distance("cron", "cron"), 0);
        assert_eq!(edit_distance("corn", "cron"), 2);
        assert_eq!(edit_distance("zones", "zone"), 1);
        assert_eq!(edit_distance("", "name"), 4);
    }

    #[test]
    fn closest_key_suggests_prefixes_and_near_misses_only() {
        assert_eq!(closest("crontab", &SCHEDULED_KEYS), Some("cron"));
        assert_eq!(closest("fixed_rat", &SCHEDULED_KEYS), Some("fixed_rate"));
        assert_eq!(
            closest("lock_at_most", &LOCK_KEYS),
            Some("lock_at_most_for")
        );
        assert_eq!(closest("keepalive", &LOCK_KEYS), Some("keep_alive"));
        assert_eq!(closest("colour", &SCHEDULED_KEYS), None);
    }

    #[test]
    fn every_pair_is_checked_and_every_mistake_recorded() {
        let mut errors = Errors::default();
        let args = parse_lock(
            quote!(
                name = "a",
                keep_alive = "yes",
                name = "b",
                colour = 1,
                lock_at_most_for
            ),
            &mut errors,
        )
        .expect("valid syntax");
        assert_eq!(args.name.unwrap().value.unwrap().value(), "a");
        // Given, but with a bad value: present without a value.
        assert!(args.keep_alive.unwrap().value.is_none());
        assert!(args.lock_at_most_for.unwrap().value.is_none());
        let all = errors.finish().unwrap_err();
        let messages: Vec<String> = all.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].contains("`keep_alive` expects `true` or `false`"));
        assert!(messages[1].contains("`name` set twice"));
        assert!(messages[2].contains("unknown key `colour`"));
        assert!(messages[3].contains("`lock_at_most_for` needs a value"));
    }

    #[test]
    fn syntax_errors_say_what_was_expected() {
        let mut errors = Errors::default();
        assert!(parse_scheduled(quote!(cron "x"), quote!(#), &mut errors).is_none());
        let message = errors.finish().unwrap_err().to_string();
        assert!(message.contains("expected `=` after `cron`"), "{message}");
    }
}
