//! From the attribute and the function to the expansion: find the other attribute, check
//! everything, then rewrite the body (the signature is kept exactly).

use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::token::Paren;
use syn::{AttrStyle, Attribute, ItemFn, LitStr, MacroDelimiter, Meta, MetaList, ReturnType};

use crate::args::{self, Args};
use crate::errors::Errors;
use crate::keys::Macro;
use crate::params::Params;
use crate::root::PRIVATE;
use crate::valid::{self, Lock, Trigger};

/// Expands `#[scheduled]` or `#[scheduler_lock]` (`this`), whichever of the two runs first:
/// it finds the other one among the function's attributes and handles both.
pub(crate) fn expand(this: Macro, args: TokenStream, item: TokenStream) -> TokenStream {
    if is_handled_marker(&args) {
        return item;
    }
    let mut func: ItemFn = match syn::parse2(item.clone()) {
        Ok(func) => func,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                format!(
                    "#[{}] applies to a function with a body (`fn` or `async fn`)",
                    this.name()
                ),
            );
            return with_error(item, error);
        }
    };
    let mut errors = Errors::default();
    let other = take_other_attribute(this, &mut func, &mut errors);
    let is_scheduled = this == Macro::Scheduled || other.is_some();

    // Both attributes, in source order (the one running is the first), then the signature,
    // so that the errors come out in the order a reader meets the mistakes.
    let own = (this, Some(args), own_attribute());
    let mut trigger = None;
    // `#[scheduled]` alone: locked with the defaults.
    let mut lock = valid::lock(&Args::none(), &mut errors);
    let mut names = valid::NameSites {
        scheduled: is_scheduled,
        lock_attr: this == Macro::SchedulerLock || other.is_some(),
        given: Vec::new(),
        unsure: false,
    };
    for (which, tokens, attr) in std::iter::once(own).chain(other) {
        let args = tokens.and_then(|tokens| args::parse(which, tokens, attr, &mut errors));
        match &args {
            Some(args) => {
                names.unsure |= args.had_unknown_key;
                if let Some(name) = args.get("name") {
                    names.given.push((which, name.ident.clone()));
                }
            }
            None => names.unsure = true,
        }
        match which {
            Macro::Scheduled => {
                trigger = args.and_then(|args| valid::trigger(&args, &mut errors));
            }
            Macro::SchedulerLock => {
                if let (Some(args), false) = (&args, is_scheduled) {
                    valid::direct_call_keys(args, &mut errors);
                }
                lock = args.and_then(|args| valid::lock(&args, &mut errors));
            }
        }
    }
    valid::name_sites(&names, &func.sig.ident, &mut errors);
    valid::signature(&func.sig, is_scheduled, &mut errors);
    let name = trigger
        .as_ref()
        .and_then(|trigger| trigger.name.clone())
        .or_else(|| lock.as_ref()?.name.clone());
    if let (Some(trigger), Some(name)) = (&trigger, &name)
        && let Err(error) = trigger.distribution.check_name(name)
    {
        errors.push(error);
    }
    if let (Some(trigger), Some(name)) = (&trigger, &name) {
        own_name_in_after(trigger, name, &mut errors);
    }

    if let Err(error) = errors.finish() {
        // The function is still emitted, as written, so that its callers compile and the user
        // sees only the real mistakes (the other attribute is marked handled: its errors are
        // in this list already).
        return with_error(func.into_token_stream(), error);
    }
    match (is_scheduled, trigger, lock, name) {
        (true, Some(trigger), Some(lock), Some(name)) => {
            scheduled_fn(&func, &trigger, &lock, &name)
        }
        (false, _, Some(lock), Some(name)) => locked_fn(&func, &lock, &name),
        // Every path to a missing trigger or lock records an error, handled above.
        _ => with_error(
            func.into_token_stream(),
            syn::Error::new(
                Span::call_site(),
                "lock-macros: arguments were rejected without a message; please report this",
            ),
        ),
    }
}

/// A job named among its own parents would wait for its own success: a cycle known at compile
/// time (cycles through other jobs are `start()`'s to find). Reported on the parent's literal.
fn own_name_in_after(trigger: &Trigger, name: &LitStr, errors: &mut Errors) {
    let own = name.value();
    for parent in trigger.after.iter().filter(|parent| parent.value() == own) {
        errors.at(
            parent.span(),
            format!(
                "`{}` is this job's own name: a job cannot run after itself, its runs would wait \
                 for its own success; name another job in `after`, or give this one a schedule \
                 (`cron`, `fixed_rate` or `fixed_delay`)",
                own.escape_debug()
            ),
        );
    }
}

/// The item followed by the errors (tokio's `token_stream_with_error`).
fn with_error(mut item: TokenStream, error: syn::Error) -> TokenStream {
    item.extend(error.into_compile_error());
    item
}

/// The arguments the first of the two macros leaves in the other one's attribute, so that the
/// other one passes the function through: `@handled`, which no valid argument list starts with.
///
/// The attribute stays (rather than being removed) so that its path is still resolved: a
/// removed `#[scheduler_lock]` would leave `use lock_core::scheduler_lock` reported as unused.
fn handled_marker() -> TokenStream {
    quote!(@handled)
}

fn is_handled_marker(args: &TokenStream) -> bool {
    let mut tokens = args.clone().into_iter();
    matches!(
        (tokens.next(), tokens.next(), tokens.next()),
        (Some(TokenTree::Punct(at)), Some(TokenTree::Ident(handled)), None)
            if at.as_char() == '@' && handled == "handled"
    )
}

/// Where errors about the running macro's attribute as a whole point: the compiler gives it
/// the attribute's span.
fn own_attribute() -> TokenStream {
    Punct::new('#', Spacing::Alone).into_token_stream()
}

/// Finds the other macro's attribute on `func`, returns which it is, its argument tokens and
/// the attribute (for error spans), and leaves it with the handled marker as arguments.
/// Attributes are matched by the last path segment, so `#[lock_scheduler::scheduled]` counts too. A
/// repeated attribute is an error.
fn take_other_attribute(
    this: Macro,
    func: &mut ItemFn,
    errors: &mut Errors,
) -> Option<(Macro, Option<TokenStream>, TokenStream)> {
    let mut other = None;
    let mut kept = Vec::with_capacity(func.attrs.len());
    for attr in std::mem::take(&mut func.attrs) {
        let which = match attr.path().segments.last() {
            Some(last) if attr.style == AttrStyle::Outer && last.ident == "scheduled" => {
                Macro::Scheduled
            }
            Some(last) if attr.style == AttrStyle::Outer && last.ident == "scheduler_lock" => {
                Macro::SchedulerLock
            }
            _ => {
                kept.push(attr);
                continue;
            }
        };
        if which == this || other.is_some() {
            errors.on(
                &attr,
                format!("#[{}] is applied twice; keep one", which.name()),
            );
            continue;
        }
        other = Some((
            which,
            arguments(&attr, which, errors),
            attr.to_token_stream(),
        ));
        let mut attr = attr;
        attr.meta = Meta::List(MetaList {
            path: attr.path().clone(),
            delimiter: MacroDelimiter::Paren(Paren::default()),
            tokens: handled_marker(),
        });
        kept.push(attr);
    }
    func.attrs = kept;
    other
}

/// The attribute's argument tokens; `None` when they are not in parentheses (reported).
fn arguments(attr: &Attribute, which: Macro, errors: &mut Errors) -> Option<TokenStream> {
    match &attr.meta {
        Meta::Path(_) => Some(TokenStream::new()),
        Meta::List(list) => Some(list.tokens.clone()),
        Meta::NameValue(pair) => {
            errors.on(
                pair,
                format!(
                    "write the arguments in parentheses: #[{}(key = \"value\", ...)]",
                    which.name()
                ),
            );
            None
        }
    }
}

/// The parts of the function the expansions share.
struct Parts<'a> {
    func: &'a ItemFn,
    /// The return type, `()` when none is written.
    ret: TokenStream,
    /// `static __LOCK_SPEC`.
    spec: TokenStream,
}

fn parts<'a>(func: &'a ItemFn, lock: &Lock, name: &LitStr) -> Parts<'a> {
    let ret = match &func.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => ty.to_token_stream(),
    };
    let fields = &lock.fields;
    let spec = quote! {
        // With every key given, `..DEFAULT` adds nothing; it stays so that the expansion is
        // the same whatever is given.
        #[allow(clippy::needless_update)]
        static __LOCK_SPEC: #PRIVATE::LockSpec =
            #PRIVATE::LockSpec::new(#PRIVATE::lock_trigger::LockSpec {
                name: #name,
                #(#fields,)*
                ..#PRIVATE::lock_trigger::LockSpec::DEFAULT
            });
    };
    Parts { func, ret, spec }
}

/// Where errors about the return type point: the return type, or the attribute if none is
/// written.
fn ret_span(func: &ItemFn) -> Span {
    match &func.sig.output {
        ReturnType::Default => Span::call_site(),
        ReturnType::Type(_, ty) => ty
            .to_token_stream()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |token| token.span()),
    }
}

/// The function with its signature and attributes kept, and `body` as its block (after the
/// body's own inner attributes, which keep applying to everything inside).
fn with_body(func: &ItemFn, extra_attrs: TokenStream, body: TokenStream) -> TokenStream {
    let outer = func.attrs.iter().filter(|a| a.style == AttrStyle::Outer);
    let inner = func.attrs.iter().filter(|a| a.style != AttrStyle::Outer);
    let (vis, sig) = (&func.vis, &func.sig);
    quote! {
        #(#outer)*
        #extra_attrs
        #vis #sig {
            #(#inner)*
            #body
        }
    }
}

/// `TriggerSpec::new(kind)`, with the options given set on top.
fn trigger_tokens(trigger: &Trigger) -> TokenStream {
    let Trigger { kind, fields, .. } = trigger;
    let spec = quote!(#PRIVATE::TriggerSpec::new(#kind));
    if fields.is_empty() {
        return spec;
    }
    quote!(#PRIVATE::TriggerSpec { #(#fields,)* ..#spec })
}

/// A `#[scheduled]` function (with or without `#[scheduler_lock]`).
///
/// The original body moves into a nested `__lock_body` with the same return type, which the
/// scheduler calls under its own lock (taken with the fire's slot), and which direct calls run
/// under the function's lock (no slot). The registration sits in the function's body, where
/// `inventory` places it at link time whether or not the function is ever called.
///
/// ```text
/// // Input:
/// #[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai")]
/// #[scheduler_lock(name = "sync_bill", lock_at_most_for = "30m", lock_at_least_for = "10s")]
/// async fn sync_bill() -> R { body }
///
/// // Output:
/// #[allow(dead_code)] // the scheduler calls it; the program may never name it
/// async fn sync_bill() -> R {
///     async fn __lock_body() -> R { body }
///     static __LOCK_SPEC: LockSpec = LockSpec::new(lock_trigger::LockSpec {
///         name: "sync_bill",
///         lock_at_most_for: Some(Duration::from_millis(1800000u64)),
///         lock_at_least_for: Duration::from_millis(10000u64),
///         ..lock_trigger::LockSpec::DEFAULT
///     });
///     inventory::submit! {
///         ScheduledJob {
///             name: "sync_bill", // the lock's name, from either attribute
///             trigger: TriggerSpec::new(TriggerKind::Cron(CronSpec {
///                 expr: "0 5 1 * * *",
///                 zone: Some("Asia/Shanghai"),
///             })),
///             lock: &__LOCK_SPEC,
///             body: JobBody::Async(|_| Box::pin(async { JobReturn::into_job_result(__lock_body().await) })),
///             check: |_| Vec::new(),
///             distribution: Distribution::Single, // `Shards(4)` with `shards = 4`
///             function: concat!(module_path!(), "::", "sync_bill"),
///             after: &[],
///             group: None,
///         }
///     }
///     run_locked(&__LOCK_SPEC, returns::<R>(), __lock_body()).await
/// }
///
/// // Output for a synchronous `fn cleanup() -> R { body }`: the same, with
///     fn __lock_body() -> R { body }
///     // ...
///             body: JobBody::Blocking(|_: &StateMap| -> JobResult { JobReturn::into_job_result(__lock_body()) }),
///     // ...
///     run_locked_blocking(&__LOCK_SPEC, __lock_body)
///
/// // Input, with extractor parameters:
/// #[scheduled(fixed_rate = "1m", name = "purge")]
/// async fn purge(State(pool): State<Pool>, ctx: JobContext) -> R { body }
/// // Output: the patterns become names in the outer signature (the nested body keeps them),
/// // each type's extractor is a `const` (building it checks `FromJob`, on the type's span),
/// // and the registered body extracts inside the lock:
/// async fn purge(__lock_arg0: State<Pool>, ctx: JobContext) -> R {
///     async fn __lock_body(State(pool): State<Pool>, ctx: JobContext) -> R { body }
///     // static __LOCK_SPEC ...
///     const __LOCK_PARAM_0: Extractor<State<Pool>> = extractor::<State<Pool>>();
///     const __LOCK_PARAM_1: Extractor<JobContext> = extractor::<JobContext>();
///     inventory::submit! {
///         ScheduledJob {
///             // name, trigger, lock ...
///             body: JobBody::Async(|__lock_state| {
///                 let __lock_state = Arc::clone(__lock_state);
///                 Box::pin(async move {
///                     let __lock_ctx = fire_context()?;
///                     let __lock_arg0 = __LOCK_PARAM_0.extract(&__lock_ctx, &__lock_state)?;
///                     let ctx = __LOCK_PARAM_1.extract(&__lock_ctx, &__lock_state)?;
///                     JobReturn::into_job_result(__lock_body(__lock_arg0, ctx).await)
///                 })
///             }),
///             check: |__lock_state| { /* each __LOCK_PARAM_i.check(..) */ },
///         }
///     }
///     run_locked(&__LOCK_SPEC, returns::<R>(), __lock_body(__lock_arg0, ctx)).await
/// }
///
/// // Input: #[scheduled(fixed_rate = "2s", misfire = "catch_up", misfire_max = 5, name = "tick")]
/// //        #[scheduler_lock(retries = 2, retry_backoff = "500ms", timeout = "1m")]
/// // Output: the same, with
///             trigger: TriggerSpec {
///                 misfire: lock_trigger::MisfirePolicy::CatchUp,
///                 misfire_max: 5u32,
///                 ..TriggerSpec::new(TriggerKind::FixedRate { period: Duration::from_millis(2000u64) })
///             },
/// // and in the LockSpec: `retries: 2u32, retry_backoff: Duration::from_millis(500u64),
/// // timeout: Some(Duration::from_millis(60000u64))`.
///
/// // Input: #[scheduled(after = ["import_orders", "import_refunds"], group = "reports")]
/// //        #[scheduler_lock(name = "report", overlap = "queue", pause_after_failures = 3, pause_for = "10m")]
/// // Output: the same, with
///             trigger: TriggerSpec::new(TriggerKind::After),
///             after: &["import_orders", "import_refunds"],
///             group: Some("reports"),
/// // and in the LockSpec: `overlap: lock_trigger::Overlap::Queue, pause_after_failures: 3u32,
/// // pause_for: Some(Duration::from_millis(600000u64))`.
///
/// // Input: #[scheduled(fixed_delay = "5s", initial_delay = "1s", name = "poll")]
/// // Output: the same, with
///             trigger: TriggerSpec {
///                 initial_delay: Duration::from_millis(1000u64),
///                 ..TriggerSpec::new(TriggerKind::FixedDelay { delay: Duration::from_millis(5000u64) })
///             },
/// ```
///
/// (All paths in the output are absolute: `::scheduled_locks::__private::...`, or
/// `::lock_core::__private::...` in a crate without the facade (`root.rs`), and
/// `::core::time::Duration`; each key's part comes from its row in `keys::KEYS`.) A nested function
/// cannot see the outer function's generics or `Self`; `valid::signature` rejects the first,
/// and inside an `impl` block the body must name its type instead of `Self`.
fn scheduled_fn(func: &ItemFn, trigger: &Trigger, lock: &Lock, name: &LitStr) -> TokenStream {
    let Parts { func, ret, spec } = parts(func, lock, name);
    let distribution = trigger.distribution.tokens();
    let after = &trigger.after;
    let group = match &trigger.group {
        Some(group) => quote!(::core::option::Option::Some(#group)),
        None => quote!(::core::option::Option::None),
    };
    let trigger = trigger_tokens(trigger);
    let params = Params::of(func);
    let outer = params.outer(func);
    let inputs = &func.sig.inputs;
    let block = &func.block;
    // Errors about the body future (not `Send`) point at the function's name, errors about
    // the return type (an error type without `Display`) at the return type.
    let span = func.sig.ident.span();
    let ret_span = ret_span(func);
    // The paths of spanned tokens carry the same span, so a diagnostic points where it did.
    let (at_name, at_ret) = (PRIVATE.spanned(span), PRIVATE.spanned(ret_span));
    let into_result = quote_spanned!(ret_span=> #at_ret::JobReturn::into_job_result);
    let args = params.forward();
    let (nested, job_body, direct_call) = if func.sig.asyncness.is_some() {
        let job_body = if params.is_empty() {
            quote_spanned! {span=>
                #at_name::JobBody::Async(|_| ::std::boxed::Box::pin(async {
                    #into_result(__lock_body().await)
                }))
            }
        } else {
            let extract = params.extract(quote!(&__lock_state));
            quote_spanned! {span=>
                #at_name::JobBody::Async(|__lock_state| {
                    let __lock_state = ::std::sync::Arc::clone(__lock_state);
                    ::std::boxed::Box::pin(async move {
                        #extract
                        #into_result(__lock_body(#args).await)
                    })
                })
            }
        };
        (
            quote!(async fn __lock_body(#inputs) -> #ret #block),
            job_body,
            quote_spanned! {ret_span=>
                #at_ret::run_locked(&__LOCK_SPEC, #at_ret::returns::<#ret>(), __lock_body(#args)).await
            },
        )
    } else {
        let extract = params.extract(quote!(__lock_state));
        let direct_body = if params.is_empty() {
            quote!(__lock_body)
        } else {
            quote!(move || __lock_body(#args))
        };
        (
            quote!(fn __lock_body(#inputs) -> #ret #block),
            quote! {
                #PRIVATE::JobBody::Blocking(
                    |__lock_state: &#PRIVATE::StateMap| -> #PRIVATE::JobResult {
                        #extract
                        #into_result(__lock_body(#args))
                    },
                )
            },
            quote_spanned! {ret_span=>
                #at_ret::run_locked_blocking(&__LOCK_SPEC, #direct_body)
            },
        )
    };
    let extractors = params.extractors();
    let check = params.check();
    // Written without `r#`, as the name proposed by the missing-name error is.
    let fn_name = func.sig.ident.unraw().to_string();
    let body = quote! {
        #nested
        #spec
        #extractors
        #PRIVATE::inventory::submit! {
            #PRIVATE::ScheduledJob {
                name: #name,
                trigger: #trigger,
                lock: &__LOCK_SPEC,
                body: #job_body,
                check: #check,
                distribution: #distribution,
                function: ::core::concat!(::core::module_path!(), "::", #fn_name),
                after: &[#(#after),*],
                group: #group,
            }
        }
        #direct_call
    };
    with_body(&outer, quote!(#[allow(dead_code)]), body)
}

/// A function with `#[scheduler_lock]` alone: every call runs the body under the lock.
///
/// The body stays in the function (in an `async move` block or a `move` closure), so
/// parameters, generics and `Self` work. The block's type is pinned to the return type, so
/// `?` and `return` inside it mean what they meant in the function.
///
/// ```text
/// // Input:
/// #[scheduler_lock(name = "export", lock_at_most_for = "10m")]
/// async fn export(day: NaiveDate) -> anyhow::Result<()> { body }
///
/// // Output:
/// async fn export(day: NaiveDate) -> anyhow::Result<()> {
///     static __LOCK_SPEC: LockSpec = LockSpec::new(lock_trigger::LockSpec {
///         name: "export",
///         lock_at_most_for: Some(Duration::from_millis(600000u64)),
///         ..lock_trigger::LockSpec::DEFAULT
///     });
///     run_locked(&__LOCK_SPEC, returns::<R>(), async move {
///         let __lock_ret: anyhow::Result<()> = { body };
///         #[allow(unreachable_code)] // when `body` ends in `return`
///         __lock_ret
///     })
///     .await
/// }
///
/// // Input: #[scheduler_lock(name = "cleanup")] fn cleanup(dir: &Path) -> io::Result<()> { body }
/// // Output:
/// fn cleanup(dir: &Path) -> io::Result<()> {
///     static __LOCK_SPEC: LockSpec = LockSpec::new(lock_trigger::LockSpec {
///         name: "cleanup",
///         ..lock_trigger::LockSpec::DEFAULT
///     });
///     run_locked_blocking(&__LOCK_SPEC, move || -> io::Result<()> { body })
/// }
/// ```
fn locked_fn(func: &ItemFn, lock: &Lock, name: &LitStr) -> TokenStream {
    let Parts { func, ret, spec } = parts(func, lock, name);
    let block = &func.block;
    let at_ret = PRIVATE.spanned(ret_span(func));
    let call = if func.sig.asyncness.is_some() {
        quote_spanned! {ret_span(func)=>
            #at_ret::run_locked(&__LOCK_SPEC, #at_ret::returns::<#ret>(), async move {
                let __lock_ret: #ret = #block;
                #[allow(unreachable_code)]
                __lock_ret
            })
            .await
        }
    } else {
        quote_spanned! {ret_span(func)=>
            #at_ret::run_locked_blocking(&__LOCK_SPEC, move || -> #ret #block)
        }
    };
    with_body(func, TokenStream::new(), quote!(#spec #call))
}

#[cfg(test)]
mod tests;
