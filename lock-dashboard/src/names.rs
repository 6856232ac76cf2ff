//! Names in requests: a job's or lock's name as a path segment, and the job names the
//! operations tables keep.

use axum::http::StatusCode;

use crate::failure::Failure;

/// `name` as one path segment: everything but unreserved characters percent-encoded.
pub(crate) fn segment(name: &str) -> String {
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

/// The job names the operations tables keep: 1 to 255 bytes.
pub(crate) fn check_job_name(name: &str) -> Result<(), Failure> {
    let max = lock_cluster::MAX_TEXT_LEN;
    if name.is_empty() || name.len() > max {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            format!("job name {name:?}: a job name is 1 to {max} bytes"),
        ));
    }
    Ok(())
}
