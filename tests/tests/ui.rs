//! Compile-time behaviour of `#[scheduled]` and `#[scheduler_lock]`: every accepted shape
//! compiles (and its program runs), every mistake gives the pinned diagnostic.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p tests --test ui`,
//! then read each one: the message must say what is wrong and how to fix it, at the right span.

use std::process::Command;

/// The toolchain the `.stderr` files were written with: rustc's wording and layout change
/// between releases.
const PINNED_RUSTC: &str = "1.95";

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    let version = rustc_version();
    if is_pinned(&version) || std::env::var_os("CI").is_some() {
        cases.compile_fail("tests/ui/fail/*.rs");
    } else {
        eprintln!(
            "SKIPPED: tests/ui/fail: the .stderr files are pinned to stable rustc {PINNED_RUSTC}, \
             this is {version}; the pass cases still ran"
        );
    }
}

/// `rustc 1.95.0 (...)`, not `1.95.0-beta.3` or `-nightly`.
fn is_pinned(version: &str) -> bool {
    version
        .split_whitespace()
        .nth(1)
        .is_some_and(|v| v.starts_with(&format!("{PINNED_RUSTC}.")) && !v.contains('-'))
}

fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    match Command::new(&rustc).arg("--version").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        Err(e) => format!("unknown ({rustc} --version failed: {e})"),
    }
}
