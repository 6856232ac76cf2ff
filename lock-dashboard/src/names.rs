//! Names in requests: a job's or lock's name as a path segment, and the checks a name from a
//! request passes before it reaches the database (400 otherwise, logged at debug).

use axum::http::StatusCode;

use crate::failure::Failure;

/// `name` as one path segment: everything but unreserved characters percent-encoded, and the
/// names `.` and `..` too (a path segment `.` or `..` would be removed from the URL).
pub(crate) fn segment(name: &str) -> String {
    if name == "." || name == ".." {
        return "%2E".repeat(name.len());
    }
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Where job `name`'s page is, below the mount point: `/jobs/{segment}`. A browser removes a
/// path segment `.` or `..` even percent-encoded (`%2E%2E`, as the URL standard says), so the
/// pages of jobs named so are at `/job?name=%2E%2E`.
pub(crate) fn job_page(name: &str) -> String {
    match dots(name) {
        true => format!("/job?name={}", segment(name)),
        false => format!("/jobs/{}", segment(name)),
    }
}

/// The page of job `name`'s runs older than run `before`.
pub(crate) fn job_runs_before(name: &str, before: i64) -> String {
    let separator = if dots(name) { '&' } else { '?' };
    format!("{}{separator}before={before}", job_page(name))
}

/// Where run `id` of job `name` is shown with its log lines: `/jobs/{segment}/runs/{id}`, or
/// `/run?name=%2E%2E&id={id}` for `.` and `..` (as [`job_page`]).
pub(crate) fn run_page(name: &str, id: i64) -> String {
    match dots(name) {
        true => format!("/run?name={}&id={id}", segment(name)),
        false => format!("/jobs/{}/runs/{id}", segment(name)),
    }
}

/// Where a button posts `action` on job `name`: `/jobs/{segment}/{action}`, or
/// `/job/{action}?name=%2E%2E` for `.` and `..`.
pub(crate) fn job_action(name: &str, action: &str) -> String {
    match dots(name) {
        true => format!("/job/{action}?name={}", segment(name)),
        false => format!("/jobs/{}/{action}", segment(name)),
    }
}

/// Where lock `name`'s release is confirmed and posted: `/locks/{segment}/unlock`, or
/// `/lock/unlock?name=%2E%2E` for `.` and `..` (as [`job_page`]).
pub(crate) fn lock_unlock(name: &str) -> String {
    match dots(name) {
        true => format!("/lock/unlock?name={}", segment(name)),
        false => format!("/locks/{}/unlock", segment(name)),
    }
}

fn dots(name: &str) -> bool {
    name == "." || name == ".."
}

fn invalid(what: &str, name: &str, why: String) -> Failure {
    tracing::debug!(target: "lock_dashboard", kind = what, name = ?name, reason = %why, "refused an invalid name");
    Failure::new(
        StatusCode::BAD_REQUEST,
        format!("{what} name {name:?}: {why}"),
    )
}

/// A job name by the rule every job is registered under (`lock_trigger::check_job_name`: no
/// control or bidi character, no leading or trailing whitespace), within what the operations
/// tables keep (1 to 255 bytes).
pub(crate) fn check_job_name(name: &str) -> Result<(), Failure> {
    let max = lock_cluster::MAX_TEXT_LEN;
    if name.len() > max {
        return Err(invalid(
            "job",
            name,
            format!("a job name is 1 to {max} bytes"),
        ));
    }
    lock_trigger::check_job_name(name).map_err(|error| invalid("job", name, error.reason()))
}

/// A lock name by the rule of the lock table (`lock_trigger::check_lock_name`).
pub(crate) fn check_lock_name(name: &str) -> Result<(), Failure> {
    lock_trigger::check_lock_name(name).map_err(|error| invalid("lock", name, error.reason()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_names_are_segments_of_their_own() {
        assert_eq!(segment("."), "%2E");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment("a.b"), "a.b");
        assert_eq!(segment("a/b"), "a%2Fb");
        assert_eq!(job_page(".."), "/job?name=%2E%2E");
        assert_eq!(job_runs_before(".", 3), "/job?name=%2E&before=3");
        assert_eq!(job_action("..", "pause"), "/job/pause?name=%2E%2E");
        assert_eq!(job_page("a b"), "/jobs/a%20b");
        assert_eq!(job_runs_before("a", 3), "/jobs/a?before=3");
        assert_eq!(job_action("a", "pause"), "/jobs/a/pause");
        assert_eq!(lock_unlock("."), "/lock/unlock?name=%2E");
        assert_eq!(lock_unlock("a:b"), "/locks/a%3Ab/unlock");
        assert_eq!(run_page("a b", 7), "/jobs/a%20b/runs/7");
        assert_eq!(run_page("..", 7), "/run?name=%2E%2E&id=7");
    }

    #[test]
    fn names_with_control_or_bidi_characters_are_refused() {
        for name in [
            "a\0b",
            "nl\nx",
            "\u{1b}]0;x",
            "a\u{202E}b",
            " pad",
            "pad ",
            "",
        ] {
            assert!(check_job_name(name).is_err(), "{name:?}");
            assert!(check_lock_name(name).is_err(), "{name:?}");
        }
        assert!(check_lock_name(&"x".repeat(65)).is_err());
        assert!(check_job_name(&"x".repeat(65)).is_ok());
        assert!(check_job_name("<script>alert(1)</script>").is_ok());
    }
}
