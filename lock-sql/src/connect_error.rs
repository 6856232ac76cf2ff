//! The error for a database that cannot be reached: where (host and port), which of the three
//! ways it failed, and what to check. Shared by the SQL providers, so each driver's own wording
//! ("pool timed out while waiting for an open connection", "error connecting to server") comes
//! with the same first line.

use std::error::Error;
use std::fmt;
use std::io;

/// How a connection to the database failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectFailure {
    /// Nothing accepted the TCP connection: the database is down, or host or port are wrong.
    Refused,
    /// No answer in time: a firewall dropping packets, a wrong host, or a server too busy.
    TimedOut,
    /// The server answered and refused the user, the password or the database.
    LoginRejected,
}

impl ConnectFailure {
    /// The failure an I/O error of a connect stands for, if it is one of the three.
    ///
    /// ```
    /// use lock_sql::ConnectFailure;
    /// use std::io::ErrorKind;
    /// assert_eq!(ConnectFailure::of_io(ErrorKind::ConnectionRefused), Some(ConnectFailure::Refused));
    /// assert_eq!(ConnectFailure::of_io(ErrorKind::TimedOut), Some(ConnectFailure::TimedOut));
    /// assert_eq!(ConnectFailure::of_io(ErrorKind::InvalidData), None);
    /// ```
    pub fn of_io(kind: io::ErrorKind) -> Option<Self> {
        match kind {
            io::ErrorKind::ConnectionRefused => Some(ConnectFailure::Refused),
            io::ErrorKind::TimedOut => Some(ConnectFailure::TimedOut),
            _ => None,
        }
    }

    /// The failure an error chain shows: the first I/O error in it that is one of the three.
    ///
    /// ```
    /// use lock_sql::ConnectFailure;
    /// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    /// assert_eq!(ConnectFailure::in_chain(&refused), Some(ConnectFailure::Refused));
    /// ```
    pub fn in_chain(error: &(dyn Error + 'static)) -> Option<Self> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(found) = error
                .downcast_ref::<io::Error>()
                .and_then(|e| Self::of_io(e.kind()))
            {
                return Some(found);
            }
            next = error.source();
        }
        None
    }
}

/// A database that could not be reached, with its host and port, how it failed and what to
/// check; the driver's error is kept as the source.
///
/// ```
/// use lock_sql::{ConnectError, ConnectFailure};
///
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// let error = ConnectError::new("PostgreSQL", "db.internal:5432", ConnectFailure::Refused, refused);
/// assert!(error.to_string().starts_with("cannot connect to PostgreSQL at db.internal:5432: the connection was refused"));
/// ```
#[derive(Debug)]
pub struct ConnectError {
    database: &'static str,
    endpoint: String,
    failure: ConnectFailure,
    source: Box<dyn Error + Send + Sync>,
}

impl ConnectError {
    /// `database` (`PostgreSQL`, `MySQL`) at `endpoint` (`host:port`, several joined by `, `)
    /// failed as `failure` says; `source` is the driver's error.
    pub fn new(
        database: &'static str,
        endpoint: impl Into<String>,
        failure: ConnectFailure,
        source: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> Self {
        ConnectError {
            database,
            endpoint: endpoint.into(),
            failure,
            source: source.into(),
        }
    }

    /// How it failed.
    ///
    /// ```
    /// use lock_sql::{ConnectError, ConnectFailure};
    /// let e = ConnectError::new("MySQL", "db:3306", ConnectFailure::TimedOut, "timed out");
    /// assert_eq!(e.failure(), ConnectFailure::TimedOut);
    /// ```
    pub fn failure(&self) -> ConnectFailure {
        self.failure
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ConnectError {
            database, endpoint, ..
        } = self;
        write!(f, "cannot connect to {database} at {endpoint}: ")?;
        match self.failure {
            ConnectFailure::Refused => write!(
                f,
                "the connection was refused (nothing listens there); check that the database is \
                 running and that the URL's host and port are right"
            ),
            ConnectFailure::TimedOut => write!(
                f,
                "the connection timed out (no answer); check the host, the port and any firewall \
                 between, or raise the connect timeout"
            ),
            ConnectFailure::LoginRejected => write!(
                f,
                "the server rejected the login; check the user, the password and the database \
                 name in the URL"
            ),
        }
    }
}

impl Error for ConnectError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}
