//! Unit tests of the expansion: what the generated code contains.

use super::*;

fn expand_str(this: Macro, args: TokenStream, item: TokenStream) -> String {
    expand(this, args, item).to_string()
}

#[test]
fn the_first_macro_handles_both_and_marks_the_other_handled() {
    let out = expand_str(
        Macro::Scheduled,
        quote!(fixed_rate = "5s"),
        quote! {
            #[lock_core::scheduler_lock(name = "job", lock_at_most_for = "1m")]
            async fn job() {}
        },
    );
    assert!(
        out.contains("# [lock_core :: scheduler_lock (@ handled)]"),
        "{out}"
    );
    assert!(
        out.contains(
            "TriggerKind :: FixedRate { period : :: core :: time :: Duration :: from_millis (5000u64) }"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "LockSpec { name : \"job\" , lock_at_most_for : :: core :: option :: Option :: Some (:: core :: time :: Duration :: from_millis (60000u64)) , .."
        ),
        "{out}"
    );
    assert!(!out.contains("compile_error"), "{out}");
    // The other macro then passes the function through.
    let item: TokenStream = quote!(
        async fn job() {}
    );
    assert_eq!(
        expand_str(Macro::SchedulerLock, quote!(@handled), item.clone()),
        item.to_string()
    );
}

#[test]
fn extractor_patterns_become_names_outside_and_stay_in_the_body() {
    let out = expand_str(
        Macro::Scheduled,
        quote!(fixed_rate = "1m", name = "purge"),
        quote!(
            async fn purge(State(pool): State<Pool>, mut ctx: JobContext) {}
        ),
    );
    assert!(
        out.contains("async fn purge (__lock_arg0 : State < Pool > , ctx : JobContext)"),
        "{out}"
    );
    assert!(
        out.contains("async fn __lock_body (State (pool) : State < Pool > , mut ctx : JobContext)"),
        "{out}"
    );
    assert!(out.contains("__LOCK_PARAM_1 . extract"), "{out}");
    assert!(!out.contains("compile_error"), "{out}");
}

#[test]
fn the_name_comes_from_either_attribute_and_names_the_job() {
    for (args, lock) in [
        (quote!(fixed_rate = "1m", name = "tick"), quote!()),
        (
            quote!(fixed_rate = "1m"),
            quote!(#[scheduler_lock(name = "tick")]),
        ),
    ] {
        let out = expand_str(Macro::Scheduled, args, quote!(#lock async fn tick() {}));
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("LockSpec { name : \"tick\""), "{out}");
        assert!(out.contains("ScheduledJob { name : \"tick\""), "{out}");
    }
}

#[test]
fn a_lock_without_a_name_or_with_two_is_refused() {
    let out = expand_str(
        Macro::Scheduled,
        quote!(fixed_rate = "1m"),
        quote!(
            async fn tick() {}
        ),
    );
    assert!(
        out.contains("a lock needs a stable `name`: add `name = \\\"tick\\\"` to #[scheduled(..)]"),
        "{out}"
    );
    let out = expand_str(
        Macro::SchedulerLock,
        quote!(),
        quote!(
            fn r#export() {}
        ),
    );
    assert!(
        out.contains("add `name = \\\"export\\\"` to #[scheduler_lock(..)]"),
        "{out}"
    );
    let out = expand_str(
        Macro::Scheduled,
        quote!(fixed_rate = "1m", name = "a"),
        quote!(
            #[scheduler_lock(name = "b")]
            async fn tick() {}
        ),
    );
    assert_eq!(out.matches("compile_error").count(), 1, "{out}");
    assert!(out.contains("`name` is set in both"), "{out}");
}

#[test]
fn on_errors_the_function_is_emitted_as_written() {
    let out = expand_str(
        Macro::SchedulerLock,
        quote!(name = ""),
        quote!(
            fn keep_me(x: u32) -> u32 {
                x
            }
        ),
    );
    assert!(
        out.starts_with("fn keep_me (x : u32) -> u32 { x }"),
        "{out}"
    );
    // Both mistakes: the empty name and the return type.
    assert_eq!(out.matches("compile_error").count(), 2, "{out}");
}
