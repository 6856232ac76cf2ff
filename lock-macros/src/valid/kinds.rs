//! The checks of the value kinds that are neither durations nor names: integers in a range,
//! and strings from a fixed list.

use syn::LitStr;

use crate::args::Given;
use crate::errors::Errors;

/// An integer literal in `min..=max`.
pub(super) fn integer(
    given: &Given,
    lit: &syn::LitInt,
    min: u64,
    max: u64,
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
        _ => {
            errors.at(
                lit.span(),
                format!("`{key}` must be between {min} and {max}, found `{lit}`"),
            );
            None
        }
    }
}

/// A string that must be one of `choices`; a near miss is named.
pub(super) fn choice(
    given: &Given,
    lit: &LitStr,
    choices: &[&'static str],
    errors: &mut Errors,
) -> bool {
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
