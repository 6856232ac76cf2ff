//! A `#[scheduled]` function's parameters: extractors, filled by the scheduler at each fire
//! from the registered state and the fire's `JobContext`.

use crate::root::PRIVATE;
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, PatIdent, Type};

/// Each parameter's name in the outer function (the nested body keeps the patterns as
/// written) and its type.
pub(crate) struct Params {
    names: Vec<Ident>,
    types: Vec<Type>,
}

impl Params {
    /// Reads the typed parameters (`valid::signature` has reported `self`).
    pub(crate) fn of(func: &ItemFn) -> Params {
        let mut params = Params {
            names: Vec::new(),
            types: Vec::new(),
        };
        for (i, arg) in func.sig.inputs.iter().enumerate() {
            let FnArg::Typed(arg) = arg else { continue };
            let name = match &*arg.pat {
                // A plain binding keeps its name (for the docs), without `mut`.
                Pat::Ident(PatIdent {
                    by_ref: None,
                    subpat: None,
                    ident,
                    ..
                }) => ident.clone(),
                _ => format_ident!("__lock_arg{}", i),
            };
            params.names.push(name);
            params.types.push((*arg.ty).clone());
        }
        params
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The outer function's signature: each pattern replaced by its name, so the direct call
    /// can pass the arguments on.
    pub(crate) fn outer(&self, func: &ItemFn) -> ItemFn {
        let mut outer = func.clone();
        let names = self.names.iter();
        let typed = outer.sig.inputs.iter_mut().filter_map(|arg| match arg {
            FnArg::Typed(arg) => Some(arg),
            FnArg::Receiver(_) => None,
        });
        for (arg, name) in typed.zip(names) {
            let span = arg.pat.span();
            *arg.pat = Pat::Ident(PatIdent {
                attrs: Vec::new(),
                by_ref: None,
                mutability: None,
                ident: Ident::new(&name.to_string(), span),
                subpat: None,
            });
        }
        outer
    }

    /// The arguments of the direct call: the outer function's parameters, as given.
    pub(crate) fn forward(&self) -> TokenStream {
        let names = &self.names;
        quote!(#(#names),*)
    }

    /// One `const __LOCK_PARAM_<i>: Extractor<T>` per parameter: building it checks that `T`
    /// is an extractor, reported on the parameter's type.
    pub(crate) fn extractors(&self) -> TokenStream {
        self.types
            .iter()
            .enumerate()
            .map(|(i, ty)| {
                let name = extractor(i);
                quote_spanned! {ty.span()=>
                    const #name: #PRIVATE::Extractor<#ty> =
                        #PRIVATE::extractor::<#ty>();
                }
            })
            .collect()
    }

    /// `|state| -> Vec<ExtractError>`: what the parameters need and `state` lacks.
    pub(crate) fn check(&self) -> TokenStream {
        if self.is_empty() {
            return quote!(|_| ::std::vec::Vec::new());
        }
        let extractors = (0..self.types.len()).map(extractor);
        quote! {
            |__lock_state| {
                let mut __lock_missing = ::std::vec::Vec::new();
                #(#extractors.check(__lock_state, &mut __lock_missing);)*
                __lock_missing
            }
        }
    }

    /// The statements that extract every parameter for one fire (inside the lock), binding
    /// them to the outer names; `state` is a `&StateMap`. A failure returns the job's error.
    pub(crate) fn extract(&self, state: TokenStream) -> TokenStream {
        if self.is_empty() {
            return TokenStream::new();
        }
        let names = &self.names;
        let extractors = (0..self.types.len()).map(extractor);
        quote! {
            let __lock_ctx = #PRIVATE::fire_context()?;
            #(let #names = #extractors.extract(&__lock_ctx, #state)?;)*
        }
    }
}

fn extractor(i: usize) -> Ident {
    format_ident!("__LOCK_PARAM_{}", i)
}
