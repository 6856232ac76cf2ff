//! The attribute arguments: `key = value` pairs, typed per key, each value kept with its span.
//!
//! Syntax is parsed first (`RawArg`); then every pair is checked on its own against the key
//! table (`keys::KEYS`: known key, set once, value of the right kind), recording each mistake
//! and going on, so a user sees all of them at once. What the values mean (cron syntax,
//! durations, combinations) is `valid.rs`.

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprLit, Ident, Lit, LitBool, LitInt, LitStr, Token};

use crate::errors::Errors;
use crate::keys::{self, Key, Literal, Macro, example};

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
            let names = attr.key_names();
            return Err(input.error(format!(
                "expected `key = value` arguments, e.g. #[{}({})]; the keys are {}",
                attr.name(),
                example(names[0]),
                list(&names)
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

/// A value of the kind its key expects, with its span.
pub(crate) enum Value {
    Str(LitStr),
    /// One string or a bracketed list of them; `written` is the value as written (where an
    /// empty list is reported).
    Names {
        names: Vec<LitStr>,
        written: Expr,
    },
    Bool(LitBool),
    Int(LitInt),
}

/// A key that was given, with its value. `value` is `None` when the value was missing or of
/// the wrong kind: that is already reported, and later checks treat the key as present so
/// that they do not report a second, misleading error (such as "no trigger").
pub(crate) struct Given {
    pub(crate) key: &'static Key,
    pub(crate) ident: Ident,
    pub(crate) value: Option<Value>,
}

/// One attribute's arguments: every known key given, each once, in source order.
pub(crate) struct Args {
    /// Where to report errors about the attribute as a whole ("no trigger").
    pub(crate) attr: TokenStream,
    /// An unknown key was given (and reported): maybe a misspelled trigger, so a missing
    /// trigger is not reported on top.
    pub(crate) had_unknown_key: bool,
    pub(crate) given: Vec<Given>,
}

impl Args {
    /// No arguments (`#[scheduled]` alone is locked with the defaults).
    pub(crate) fn none() -> Self {
        Args {
            attr: TokenStream::new(),
            had_unknown_key: false,
            given: Vec::new(),
        }
    }

    /// The key `name`, if it was given.
    pub(crate) fn get(&self, name: &str) -> Option<&Given> {
        self.given.iter().find(|given| given.key.name == name)
    }
}

/// Parses one attribute's arguments against the key table, recording every mistake in
/// `errors` (unknown key, value of the wrong kind, key set twice). `None` when the arguments
/// are not even `key = value` pairs.
pub(crate) fn parse(
    attr: Macro,
    tokens: TokenStream,
    attr_tokens: TokenStream,
    errors: &mut Errors,
) -> Option<Args> {
    let raw = parse_raw(tokens, attr).map_err(|e| errors.push(e)).ok()?;
    let mut args = Args {
        attr: attr_tokens,
        had_unknown_key: false,
        given: Vec::new(),
    };
    for arg in raw {
        let Some(key) = keys::find(attr, &arg.key.to_string()) else {
            unknown_key(attr, &arg.key, errors);
            args.had_unknown_key = true;
            continue;
        };
        let value = match key.value.literal() {
            Literal::Str => string_value(&arg, errors).map(Value::Str),
            Literal::StrList => names_value(&arg, errors),
            Literal::Bool => bool_value(&arg, errors).map(Value::Bool),
            Literal::Int => int_value(&arg, errors).map(Value::Int),
        };
        if args.get(key.name).is_some() {
            errors.at(
                arg.key.span(),
                format!("`{}` set twice; keep one of the two values", arg.key),
            );
            continue;
        }
        args.given.push(Given {
            key,
            ident: arg.key,
            value,
        });
    }
    Some(args)
}

fn unknown_key(attr: Macro, key: &Ident, errors: &mut Errors) {
    let names = attr.key_names();
    let valid = list(&names);
    let other = attr.other();
    let written = key.to_string();
    let message = if keys::find(other, &written).is_some() {
        format!(
            "`{key}` belongs in #[{}(...)], not in #[{}(...)]; the keys here are {valid}",
            other.name(),
            attr.name()
        )
    } else if let Some(near) = closest(&written, &names) {
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
pub(crate) fn closest(written: &str, keys: &[&'static str]) -> Option<&'static str> {
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
pub(crate) fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
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

/// `key = "a"` or `key = ["a", "b"]`: each element a string literal (each other one reported).
fn names_value(arg: &RawArg, errors: &mut Errors) -> Option<Value> {
    let key = &arg.key;
    let example = example(&key.to_string());
    let names = match &arg.value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        })) => vec![s.clone()],
        Some(Expr::Array(list)) => {
            let mut names = Vec::with_capacity(list.elems.len());
            let mut all_strings = true;
            for elem in &list.elems {
                match elem {
                    Expr::Lit(ExprLit {
                        lit: Lit::Str(s), ..
                    }) => names.push(s.clone()),
                    other => {
                        all_strings = false;
                        errors.on(
                            other,
                            format!(
                                "`{key}` lists job names as string literals, e.g. \
                                 `{key} = [\"import_orders\", \"import_refunds\"]`"
                            ),
                        );
                    }
                }
            }
            if !all_strings {
                return None;
            }
            names
        }
        Some(other) => {
            errors.on(
                other,
                format!(
                    "`{key}` expects a string literal or a list of them, e.g. `{example}` or \
                     `{key} = [\"import_orders\", \"import_refunds\"]`"
                ),
            );
            return None;
        }
        None => {
            errors.at(
                key.span(),
                format!("`{key}` needs a value, e.g. `{example}`"),
            );
            return None;
        }
    };
    Some(Value::Names {
        names,
        written: arg.value.clone()?,
    })
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

fn int_value(arg: &RawArg, errors: &mut Errors) -> Option<LitInt> {
    let key = &arg.key;
    match &arg.value {
        Some(Expr::Lit(ExprLit {
            lit: Lit::Int(n), ..
        })) => Some(n.clone()),
        Some(other) => {
            errors.on(
                other,
                format!(
                    "`{key}` expects an integer literal (without quotes), e.g. `{}`",
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
        let scheduled = Macro::Scheduled.key_names();
        let lock = Macro::SchedulerLock.key_names();
        assert_eq!(closest("crontab", &scheduled), Some("cron"));
        assert_eq!(closest("fixed_rat", &scheduled), Some("fixed_rate"));
        assert_eq!(closest("lock_at_most", &lock), Some("lock_at_most_for"));
        assert_eq!(closest("keepalive", &lock), Some("keep_alive"));
        assert_eq!(closest("colour", &scheduled), None);
    }

    #[test]
    fn every_pair_is_checked_and_every_mistake_recorded() {
        let mut errors = Errors::default();
        let args = parse(
            Macro::SchedulerLock,
            quote!(
                name = "a",
                keep_alive = "yes",
                name = "b",
                colour = 1,
                lock_at_most_for
            ),
            quote!(#),
            &mut errors,
        )
        .expect("valid syntax");
        assert!(
            matches!(&args.get("name").unwrap().value, Some(Value::Str(s)) if s.value() == "a")
        );
        // Given, but with a bad value: present without a value.
        assert!(args.get("keep_alive").unwrap().value.is_none());
        assert!(args.get("lock_at_most_for").unwrap().value.is_none());
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
        assert!(parse(Macro::Scheduled, quote!(cron "x"), quote!(#), &mut errors).is_none());
        let message = errors.finish().unwrap_err().to_string();
        assert!(message.contains("expected `=` after `cron`"), "{message}");
    }
}
