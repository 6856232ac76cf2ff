//! Who an instance is, as written to `locked_by`.

use rand::Rng;

/// The longest instance id: the `locked_by` column is `VARCHAR(255)`.
pub const MAX_INSTANCE_ID_LEN: usize = 255;

/// The default instance id: `hostname:pid:random`.
///
/// Never just the hostname: two processes on one host (or two containers that share a
/// hostname) must not be able to release each other's locks.
///
/// ```
/// let a = lock_core::default_instance_id();
/// let b = lock_core::default_instance_id();
/// assert_ne!(a, b);
/// assert_eq!(a.split(':').count(), 3);
/// ```
pub fn default_instance_id() -> String {
    let host = gethostname::gethostname();
    let host = host.to_string_lossy();
    let host: String = host.chars().filter(|c| *c != ':').take(200).collect();
    let random: u32 = rand::rng().random();
    format!("{host}:{}:{random:08x}", std::process::id())
}
