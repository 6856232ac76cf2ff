//! What every connection the provider uses must be like, and how it gets that way.
//!
//! - **Session time zone `+00:00`.** `UTC_TIMESTAMP()` does not depend on it, and neither do
//!   `DATETIME` columns, but a ShedLock table's `TIMESTAMP(3)` columns convert every value through
//!   the session zone: in a zone with daylight saving time some UTC wall times cannot be stored
//!   at all (ShedLock issue 1876) and read-back times would be local. Pinned by a `setup`
//!   statement, which mysql_async runs on every new connection and again after every reset.
//! - **No reset when a connection returns to the pool.** mysql_async resets pooled connections
//!   by default (`COM_RESET_CONNECTION`), which also drops their prepared statements, so each
//!   use would prepare its statement again: one more round trip per operation. The provider
//!   leaves nothing in a session that a reset would need to clear.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

/// The statement that pins the session time zone to UTC.
pub(crate) const UTC_SESSION: &str = "SET time_zone = '+00:00'";

/// See [`crate::MySqlLockProvider::pool_options`].
pub(crate) fn pool_options(opts: Opts) -> OptsBuilder {
    let mut setup: Vec<String> = opts.setup().to_vec();
    setup.push(UTC_SESSION.to_owned());
    let pool_opts = opts.pool_opts().clone().with_reset_connection(false);
    OptsBuilder::from_opts(opts)
        .setup(setup)
        .pool_opts(pool_opts)
}

/// How a borrowed connection was made ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Nothing to do: the pool's own options pin the zone, or the table does not care.
    Ready,
    /// The pool does not pin the zone and the table has `TIMESTAMP` columns, so the zone was set
    /// on this connection now, at the cost of a round trip.
    ZoneSetNow,
}

/// Makes a connection just taken from the pool fit for the provider's statements.
/// `pool_pins_utc` is [`pins_utc`] of the pool's options, worked out once per pool.
pub(crate) async fn ready(
    conn: &mut Conn,
    pool_pins_utc: bool,
    zone_sensitive: bool,
) -> Result<Readiness, mysql_async::Error> {
    if pool_pins_utc || !zone_sensitive {
        // Keep prepared statements across uses (see the module docs).
        conn.reset_connection(false);
        return Ok(Readiness::Ready);
    }
    // A pool the provider does not configure: set the zone for this use, and leave the pool's
    // reset policy alone so that, if it resets, the owner's session settings come back.
    conn.query_drop(UTC_SESSION).await?;
    Ok(Readiness::ZoneSetNow)
}

/// Whether a pool's options already pin the session zone to UTC.
pub(crate) fn pins_utc(opts: &Opts) -> bool {
    opts.init()
        .iter()
        .chain(opts.setup())
        .any(|statement| sets_utc(statement))
}

fn sets_utc(statement: &str) -> bool {
    let compact: String = statement
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    ["'+00:00'", "\"+00:00\"", "'+0:00'", "'utc'", "\"utc\""]
        .iter()
        .any(|zone| compact.contains(&format!("time_zone={zone}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_utc_setup() {
        assert!(sets_utc(UTC_SESSION));
        assert!(sets_utc("set session time_zone='+00:00'"));
        assert!(sets_utc("SET @@session.time_zone = 'UTC'"));
        assert!(!sets_utc("SET time_zone = 'Europe/Berlin'"));
        assert!(!sets_utc("SET sql_mode = ''"));
    }

    #[test]
    fn options_keep_the_users_and_add_ours() {
        let opts =
            Opts::from_url("mysql://root@127.0.0.1:3306/test?reset_connection=true").unwrap();
        let opts = OptsBuilder::from_opts(opts).setup(vec!["SET sql_mode = ''"]);
        let opts = Opts::from(pool_options(Opts::from(opts)));
        assert_eq!(opts.setup(), ["SET sql_mode = ''", UTC_SESSION]);
        assert!(!opts.pool_opts().reset_connection());
        assert!(pins_utc(&opts));
        assert_eq!(opts.db_name(), Some("test"));
    }
}
