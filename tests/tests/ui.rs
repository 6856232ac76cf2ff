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
/// is nowhere. So the failing cases are built again in trybuild's project, their printed errors
/// counted against cargo's count.
///
/// One cargo run builds them all, with trybuild's own flags (`build`, `--target`, its rustflags,
/// no incremental): the dependencies trybuild has just built are fresh for it, so only the
/// cases' own crates compile, side by side. (A `cargo check` per case recompiled every
/// dependency in check mode first, then paid cargo's start-up 60 times: over a minute of CI.)
fn every_error_is_printed_once() {
    let project = trybuild_project();
    let manifest = std::fs::read_to_string(project.join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("trybuild's project in {}: {e}", project.display()));
    let cases: Vec<(&str, &str)> = bins(&manifest)
        .filter(|(_, path)| path.contains("/ui/fail/"))
        .collect();
    assert!(
        !cases.is_empty(),
        "no failing case in {}",
        project.display()
    );
    // trybuild's flags (its `cargo.rs` and `rustflags.rs`): any difference would make cargo
    // rebuild every dependency. `build`, not `check`, because the project has pass cases.
    let rustflags =
        r#"["--cfg", "trybuild", "--verbose", "-A", "dead_code", "--diagnostic-width=140"]"#;
    let host = host_target();
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    command
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", project.parent().unwrap())
        .env_remove("RUSTFLAGS")
        .env("CARGO_INCREMENTAL", "0")
        .arg("--offline")
        .arg(format!("--config=build.rustflags={rustflags}"))
        .arg(format!("--config=target.{host}.rustflags={rustflags}"))
        .args([
            "build",
            "--target",
            &host,
            "--no-default-features",
            "--features",
            "",
        ])
        .args([
            "--quiet",
            "--color=never",
            "--message-format=json",
            "--keep-going",
        ]);
    for (bin, _) in &cases {
        command.args(["--bin", bin]);
    }
    let out = command.output().expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);

    // Each case's rendered diagnostics, as `cargo check --bin CASE` would print them.
    let mut rendered: std::collections::HashMap<&str, String> = Default::default();
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-message" {
            continue;
        }
        let (Some(bin), Some(text)) = (
            message["target"]["name"].as_str(),
            message["message"]["rendered"].as_str(),
        ) else {
            continue;
        };
        if let Some((name, _)) = cases.iter().find(|(name, _)| *name == bin) {
            rendered.entry(name).or_default().push_str(text);
        }
    }

    let mut wrong = Vec::new();
    for (bin, path) in &cases {
        let printed = rendered
            .get(bin)
            .map(|text| {
                text.lines()
                    .filter(|line| line.starts_with("error"))
                    .count()
            })
            .unwrap_or(0);
        // cargo: "error: could not compile `x` (bin "CASE") due to 3 previous errors".
        let counted = stderr
            .lines()
            .find(|line| line.contains(&format!("(bin \"{bin}\")")))
            .and_then(|line| line.split("due to ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok());
        match counted {
            Some(counted) if counted == printed => {}
            Some(counted) => wrong.push(format!(
                "{path}: rustc counted {counted} errors and printed {printed}"
            )),
            None => wrong.push(format!(
                "{path}: cargo did not say it failed to compile (a failing case that compiles?)"
            )),
        }
    }
    assert!(wrong.is_empty(), "{}\n{stderr}", wrong.join("\n"));
}

/// The host's target tuple (`rustc -vV`'s `host:`), which trybuild passes as `--target`.
fn host_target() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(&rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_owned()
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
