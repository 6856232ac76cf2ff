//! The one skip-unless-CI rule.
//!
//! A test that cannot run here (its database is unreachable, a tool it needs is missing)
//! fails when the `CI` variable is set, because CI must never pass by testing nothing.
//! Anywhere else it prints `SKIPPED: <why>` and the test returns without asserting anything.

use std::fmt::Display;

/// Whether the `CI` variable is set.
///
/// ```
/// let _ = test_support::skip::in_ci();
/// ```
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Prints `SKIPPED: <why>` straight to the process's stderr: the test harness captures
/// `eprintln!` of passing tests, and a skip must be seen.
///
/// ```
/// test_support::skip::skipped("nothing to test here");
/// ```
pub fn skipped(why: impl Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// With `CI` set, panics with `why`; otherwise prints `SKIPPED: <why>`.
///
/// ```
/// if !test_support::skip::in_ci() {
///     test_support::skip::skip_unless_ci("the optional tool is missing");
/// }
/// ```
pub fn skip_unless_ci(why: impl Display) {
    if in_ci() {
        panic!("{why} (CI is set, so this is a failure)");
    }
    skipped(why);
}

/// The rule for a database that cannot be reached: `<db> unreachable at <url>: <error>`,
/// a failure under `CI`, a `SKIPPED` line elsewhere. The URL is printed without its password.
///
/// ```
/// if !test_support::skip::in_ci() {
///     test_support::skip::unreachable("postgres", "postgres://u:pw@db/x", &"refused");
/// }
/// ```
pub fn unreachable(db: &str, url: &str, error: &dyn Display) {
    skip_unless_ci(format!(
        "{db} unreachable at {}: {error}",
        crate::db::redact(url)
    ));
}

/// `Some(value)` when connected; otherwise applies [`unreachable()`] and returns `None`.
///
/// ```
/// let connected: Result<u32, &str> = Ok(7);
/// assert_eq!(test_support::skip::or_unreachable("postgres", "postgres://db", connected), Some(7));
/// ```
pub fn or_unreachable<T, E: Display>(db: &str, url: &str, connected: Result<T, E>) -> Option<T> {
    match connected {
        Ok(value) => Some(value),
        Err(error) => {
            unreachable(db, url, &error);
            None
        }
    }
}

/// An error with its causes, on one line (`error: cause: cause`), for skip and failure
/// messages: a driver's top-level error often says only "connection failed".
///
/// ```
/// #[derive(Debug)]
/// struct Connect(std::fmt::Error);
/// impl std::fmt::Display for Connect {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("connection failed")
///     }
/// }
/// impl std::error::Error for Connect {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// assert_eq!(
///     test_support::skip::chain(&Connect(std::fmt::Error)),
///     "connection failed: an error occurred when formatting an argument"
/// );
/// ```
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether `program --version` runs; when it does not, applies the rule with
/// `<program> not installed: <error>` (so a missing `faketime` fails CI).
///
/// ```
/// // `cargo` runs wherever this doc test does.
/// assert!(test_support::skip::command_available("cargo"));
/// ```
pub fn command_available(program: &str) -> bool {
    match std::process::Command::new(program)
        .arg("--version")
        .output()
    {
        Ok(_) => true,
        Err(error) => {
            skip_unless_ci(format!("{program} not installed: {error}"));
            false
        }
    }
}
