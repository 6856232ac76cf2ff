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
        // Runs the cases now, so that their project is there to be checked again.
        drop(cases);
        every_error_is_printed_once();
    } else {
        eprintln!(
            "SKIPPED: tests/ui/fail: the .stderr files are pinned to stable rustc {PINNED_RUSTC}, \
             this is {version}; the pass cases still ran"
        );
    }
}

/// rustc says how many errors it found ("due to 3 previous errors"), and trybuild's `.stderr`
/// leaves that line out: a diagnostic counted but not printed (one rustc found twice at one span
/// and printed once) passes the `.stderr` comparison and still tells the user of an error that
/// is nowhere. So each failing case is checked again in trybuild's project, its printed errors
/// counted against rustc's count.
fn every_error_is_printed_once() {
    let project = trybuild_project();
    let manifest = std::fs::read_to_string(project.join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("trybuild's project in {}: {e}", project.display()));
    let mut wrong = Vec::new();
    for (bin, path) in bins(&manifest).filter(|(_, path)| path.contains("/ui/fail/")) {
        let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
            .args(["check", "--quiet", "--color=never", "--bin", bin])
            .current_dir(&project)
            .env("CARGO_TARGET_DIR", project.parent().unwrap())
            .output()
            .expect("cargo runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let printed = stderr
            .lines()
            .filter(|line| {
                line.starts_with("error") && !line.starts_with("error: could not compile")
            })
            .count();
        let counted = stderr
            .split("due to ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(1);
        if printed != counted {
            wrong.push(format!(
                "{path}: rustc counted {counted} errors and printed {printed}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `<target>/tests/trybuild/tests`, where trybuild writes the cases' project.
fn trybuild_project() -> std::path::PathBuf {
    // This test runs as `<target>/debug/deps/ui-<hash>`.
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe.ancestors().nth(3).expect("<target>/debug/deps/ui-*");
    target
        .join("tests")
        .join("trybuild")
        .join(env!("CARGO_PKG_NAME"))
}

/// The `[[bin]]` sections of trybuild's manifest: (name, path).
fn bins(manifest: &str) -> impl Iterator<Item = (&str, &str)> {
    manifest.split("[[bin]]").skip(1).filter_map(|section| {
        let value = |key: &str| {
            section.lines().find_map(|line| {
                line.strip_prefix(key)?
                    .trim()
                    .strip_prefix('=')?
                    .trim()
                    .strip_prefix('"')?
                    .strip_suffix('"')
            })
        };
        Some((value("name")?, value("path")?))
    })
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
