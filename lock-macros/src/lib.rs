#![doc = include_str!("../README.md")]

use proc_macro::TokenStream;

/// Marks a function as a scheduled job (being written).
#[proc_macro_attribute]
pub fn scheduled(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Locks every call of a function (being written).
#[proc_macro_attribute]
pub fn scheduler_lock(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
