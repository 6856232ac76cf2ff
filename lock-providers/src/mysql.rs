//! `mysql://` and `mariadb://`: [`MySqlLockProvider`].

use std::fmt;

use async_trait::async_trait;
use lock_provider_mysql::MySqlLockProvider;
use mysql_async::Opts;

use crate::database::Database;
use crate::{OpenError, OpenOptions, OpenedProvider, UrlError};

/// A MySQL or MariaDB server, by URL.
pub(crate) struct MySql {
    /// The URL with a `mysql://` scheme, which is all the driver accepts.
    url: String,
    opts: Opts,
}

pub(crate) fn parse(_scheme: &str, rest: &str) -> Result<Box<dyn Database>, UrlError> {
    let url = format!("mysql://{rest}");
    // As `MySqlLockProvider::connect` reads it: `ssl-mode` and `ssl-ca` too.
    let opts = MySqlLockProvider::opts_from_url(&url)
        .map_err(|e| UrlError::new(format!("is not a valid MySQL/MariaDB URL: {e}")))?;
    Ok(Box::new(MySql { url, opts }))
}

#[async_trait]
impl Database for MySql {
    fn kind(&self) -> &'static str {
        "mysql"
    }

    async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError> {
        let provider = options
            .connect(self, MySqlLockProvider::connect(&self.url))
            .await?
            .with_table(options.table_name())
            .map_err(OpenError::Table)?;
        options.ensure_schema(provider.ensure_schema()).await?;
        let pool = provider.pool().clone();
        // mysql_async wants its pool disconnected, not dropped, to close connections cleanly;
        // nothing useful can be done if the goodbye fails.
        Ok(OpenedProvider::new(provider).closing_with(async move {
            let _ = pool.disconnect().await;
        }))
    }
}

/// Host, port and database: never the user or password.
impl fmt::Display for MySql {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the MySQL/MariaDB server at {}:{}",
            self.opts.ip_or_hostname(),
            self.opts.tcp_port()
        )?;
        if let Some(db) = self.opts.db_name() {
            write!(f, " (database {db})")?;
        }
        Ok(())
    }
}

/// Like `Display`: a derived `Debug` would print the URL, password included.
impl fmt::Debug for MySql {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MySql").field(&self.to_string()).finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::LockDatabase;

    #[test]
    fn tls_parameters_pass_through() {
        let url = "mysql://root@db:3307/test?ssl-mode=VERIFY_IDENTITY";
        assert_eq!(
            LockDatabase::parse(url).unwrap().to_string(),
            "the MySQL/MariaDB server at db:3307 (database test)"
        );
        let err = LockDatabase::parse("mysql://root@db/test?ssl-mode=PREFERRED")
            .unwrap_err()
            .to_string();
        assert!(err.contains("PREFERRED is not supported"), "{err}");
    }
}
