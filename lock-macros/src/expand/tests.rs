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

#[test]
fn after_group_overlap_and_the_breaker_reach_the_registration() {
    let out = expand_str(
        Macro::Scheduled,
        quote!(
            after = ["import_orders", "import_refunds"],
            group = "reports"
        ),
        quote! {
            #[scheduler_lock(
                name = "report",
                overlap = "replace",
                pause_after_failures = 3,
                pause_for = "10m"
            )]
            async fn report() {}
        },
    );
    assert!(!out.contains("compile_error"), "{out}");
    assert!(
        out.contains("__private :: TriggerSpec :: new (:: lock_scheduler :: __private :: TriggerKind :: After)"),
        "{out}"
    );
    assert!(
        out.contains("after : & [\"import_orders\" , \"import_refunds\"]"),
        "{out}"
    );
    assert!(
        out.contains("group : :: core :: option :: Option :: Some (\"reports\")"),
        "{out}"
    );
    assert!(
        out.contains(
            "overlap : :: lock_scheduler :: __private :: lock_trigger :: Overlap :: Replace"
        ),
        "{out}"
    );
    assert!(out.contains("pause_after_failures : 3u32"), "{out}");
    assert!(
        out.contains(
            "pause_for : :: core :: option :: Option :: Some (:: core :: time :: Duration :: from_millis (600000u64))"
        ),
        "{out}"
    );
}

#[test]
fn a_clock_job_registers_no_parents_and_no_group() {
    let out = expand_str(
        Macro::Scheduled,
        quote!(fixed_rate = "1m", name = "tick", after = "x"),
        quote!(
            async fn tick() {}
        ),
    );
    // Two triggers: refused, whichever is first.
    assert!(
        out.contains("`after` and `fixed_rate` are both set"),
        "{out}"
    );
    let out = expand_str(
        Macro::Scheduled,
        quote!(fixed_rate = "1m", name = "tick"),
        quote!(
            async fn tick() {}
        ),
    );
    assert!(out.contains("after : & []"), "{out}");
    assert!(
        out.contains("group : :: core :: option :: Option :: None"),
        "{out}"
    );
}

#[test]
fn a_job_after_itself_is_refused_whichever_attribute_names_it() {
    for (args, lock) in [
        (quote!(after = ["a", "tick"], name = "tick"), quote!()),
        (
            quote!(after = ["a", "tick"]),
            quote!(#[scheduler_lock(name = "tick")]),
        ),
    ] {
        let out = expand_str(Macro::Scheduled, args, quote!(#lock async fn tick() {}));
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
        assert!(out.contains("`tick` is this job's own name"), "{out}");
    }
}
