//! Collects independent mistakes so that one compile shows all of them (serde_derive's `Ctxt`).

use proc_macro2::Span;
use std::fmt::Display;

/// Every error found so far, combined into one `syn::Error`.
#[derive(Default)]
pub(crate) struct Errors {
    all: Option<syn::Error>,
}

impl Errors {
    /// Records `error` next to the earlier ones.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.all {
            Some(all) => all.combine(error),
            None => self.all = Some(error),
        }
    }

    /// Records `message` at `span`.
    pub(crate) fn at(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Records `message` on the whole of `tokens` (first to last token).
    pub(crate) fn on(&mut self, tokens: impl quote::ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// `Err` with every recorded error, or `Ok` if there was none.
    pub(crate) fn finish(self) -> Result<(), syn::Error> {
        match self.all {
            Some(all) => Err(all),
            None => Ok(()),
        }
    }
}
