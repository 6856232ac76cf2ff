//! What the provider checks about the server at connect: its version (the scripts need Redis
//! 5.0 or later) and whether a restart would forget locks, fences and `last_fire`.

use std::fmt;

use redis::aio::ConnectionManager;

/// The oldest Redis the provider runs on: 5.0, the first to replicate a script that reads
/// `TIME` by its effects by default (earlier versions refuse a write after `TIME` in a script).
pub const MIN_REDIS_VERSION: (u32, u32) = (5, 0);

/// How the server keeps its data across a restart, as read with `CONFIG GET` at connect.
///
/// ```
/// use lock_provider_redis::Persistence;
/// assert!(Persistence::None.restart_loses_fences());
/// assert!(!Persistence::AppendOnly { fsync: "everysec".into() }.restart_loses_fences());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Persistence {
    /// `appendonly yes`: every write is in the append-only file before its reply is sent; a
    /// restart of the process loses nothing, a crash of the machine loses what was not yet
    /// synced (`appendfsync everysec`: up to about a second).
    AppendOnly {
        /// The `appendfsync` setting: `always`, `everysec` or `no`.
        fsync: String,
    },
    /// RDB snapshots only (`save` rules): a restart goes back to the last snapshot, so locks,
    /// fences and `last_fire` written since then are forgotten.
    Snapshots {
        /// The `save` rules, e.g. `3600 1 300 100 60 10000`.
        save: String,
    },
    /// Neither AOF nor RDB: a restart forgets every lock, fence and `last_fire`.
    None,
    /// `CONFIG GET` is not allowed here (a managed service, an ACL): the provider cannot tell.
    Unknown {
        /// The server's refusal.
        reason: String,
    },
}

impl Persistence {
    /// Whether a restart of the server would forget fences and `last_fire` written before it.
    pub fn restart_loses_fences(&self) -> bool {
        matches!(self, Persistence::Snapshots { .. } | Persistence::None)
    }
}

impl fmt::Display for Persistence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Persistence::AppendOnly { fsync } => {
                write!(f, "append-only file (appendfsync {fsync})")
            }
            Persistence::Snapshots { save } => write!(f, "RDB snapshots only (save {save:?})"),
            Persistence::None => f.write_str("no persistence (neither AOF nor RDB)"),
            Persistence::Unknown { reason } => write!(f, "unknown (CONFIG GET refused: {reason})"),
        }
    }
}

/// `CONFIG GET name`'s value, or the server's refusal.
async fn config_get(conn: &mut ConnectionManager, name: &str) -> Result<String, String> {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(conn)
        .await
        .map_err(|e| e.to_string())?;
    match pair.as_slice() {
        [_, value] => Ok(value.clone()),
        _ => Err(format!("CONFIG GET {name} returned {pair:?}")),
    }
}

/// Reads the persistence settings; `Unknown` where `CONFIG GET` is not allowed.
pub(crate) async fn persistence(conn: &mut ConnectionManager) -> Persistence {
    let aof = match config_get(conn, "appendonly").await {
        Ok(aof) => aof,
        Err(reason) => return Persistence::Unknown { reason },
    };
    if aof.eq_ignore_ascii_case("yes") {
        let fsync = config_get(conn, "appendfsync")
            .await
            .unwrap_or_else(|e| format!("unknown: {e}"));
        return Persistence::AppendOnly { fsync };
    }
    match config_get(conn, "save").await {
        Ok(save) if save.trim().is_empty() => Persistence::None,
        Ok(save) => Persistence::Snapshots { save },
        Err(reason) => Persistence::Unknown { reason },
    }
}

/// The server's `redis_version` from `INFO server`.
pub(crate) async fn version(conn: &mut ConnectionManager) -> Result<String, redis::RedisError> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    Ok(parse_version(&info).unwrap_or("unknown").to_owned())
}

fn parse_version(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .map(str::trim)
}

/// Whether `version` (`7.0.15`) is at least [`MIN_REDIS_VERSION`]; an unreadable version is
/// given the benefit of the doubt (a fork that reports something else).
pub(crate) fn supported(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= MIN_REDIS_VERSION,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"),
            Some("7.0.15")
        );
        assert!(supported("7.0.15") && supported("5.0.0") && supported("unknown"));
        assert!(!supported("4.0.14") && !supported("3.2.1"));
    }
}
