//! Where the expansion's paths start: the crate the user depends on.
//!
//! A service depends on `scheduled-locks` alone, so `::lock_core` does not resolve in its code;
//! the workspace's own crates and a provider author's tests depend on `lock-core` directly.
//! The expansion names whichever of the two the calling crate's `Cargo.toml` has (renamed or
//! not), preferring the facade, so both keep working with one macro.

use proc_macro_crate::{FoundCrate, crate_name};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, TokenStreamExt, quote_spanned};

/// `::<root>::__private`, written into the expansion as `#PRIVATE` (see [`PrivatePath`]).
pub(crate) const PRIVATE: PrivatePath = PrivatePath { span: None };

/// The path of the module the macros expand to, with the span of the tokens around it (or
/// the call site's).
#[derive(Clone, Copy)]
pub(crate) struct PrivatePath {
    span: Option<Span>,
}

impl PrivatePath {
    /// The same path, spanned like `span` (for `quote_spanned!`, so that a diagnostic about
    /// the path points where the surrounding tokens do).
    pub(crate) fn spanned(self, span: Span) -> PrivatePath {
        PrivatePath { span: Some(span) }
    }
}

impl ToTokens for PrivatePath {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let span = self.span.unwrap_or_else(Span::call_site);
        let root = Ident::new(&root_crate(), span);
        tokens.append_all(quote_spanned!(span=> ::#root::__private));
    }
}

/// The calling crate's name for `scheduled-locks`, else for `lock-core`, else `lock_core`
/// (so that a crate with neither gets rustc's "unresolved `lock_core`" rather than a panic).
fn root_crate() -> String {
    for (package, lib) in [
        ("scheduled-locks", "scheduled_locks"),
        ("lock-core", "lock_core"),
    ] {
        match crate_name(package) {
            Ok(FoundCrate::Name(name)) => return name,
            // The crate's own tests, examples and doc tests reach it by its name.
            Ok(FoundCrate::Itself) => return lib.to_owned(),
            Err(_) => {}
        }
    }
    "lock_core".to_owned()
}
