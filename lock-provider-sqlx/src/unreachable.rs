//! A database the pool cannot reach, said with its host and port and how it failed.
//!
//! sqlx retries a refused connection until the pool's acquire timeout and then reports only
//! "pool timed out while waiting for an open connection": a lazy pool on a database that is
//! down gives no host and no cause. When the pool has no connection open, one TCP connect to
//! the pool's host tells a refused port from one that does not answer; a pool with connections
//! open timed out for another reason (all of them busy) and keeps sqlx's error.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use lock_sql::{ConnectError, ConnectFailure};

/// How long the probe of a timed-out pool waits: a refused port answers at once.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Where a pool connects: `PostgreSQL`, `host:port`, whether a socket file is used instead.
pub(crate) struct Endpoint {
    pub(crate) database: &'static str,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) socket: bool,
}

impl Endpoint {
    fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `error` as a [`ConnectError`] when it is a failure to connect (`open` is how many
/// connections the pool has); any other error is given back.
pub(crate) fn classify(
    endpoint: &Endpoint,
    open: u32,
    login_rejected: impl Fn(&dyn sqlx::error::DatabaseError) -> bool,
    error: sqlx::Error,
) -> Result<ConnectError, sqlx::Error> {
    let failure = match &error {
        sqlx::Error::PoolTimedOut if open == 0 && !endpoint.socket => probe(endpoint),
        sqlx::Error::Io(io) => match ConnectFailure::of_io(io.kind()) {
            Some(failure) => failure,
            None => return Err(error),
        },
        sqlx::Error::Database(db) if login_rejected(db.as_ref()) => ConnectFailure::LoginRejected,
        _ => return Err(error),
    };
    Ok(ConnectError::new(
        endpoint.database,
        endpoint.address(),
        failure,
        error,
    ))
}

/// Blocking, on the error path only and for at most [`PROBE_TIMEOUT`] per address, after the
/// pool already waited its acquire timeout.
fn probe(endpoint: &Endpoint) -> ConnectFailure {
    let Ok(addresses) = (endpoint.host.as_str(), endpoint.port).to_socket_addrs() else {
        return ConnectFailure::TimedOut;
    };
    let mut refused = false;
    for address in addresses {
        match TcpStream::connect_timeout(&address, PROBE_TIMEOUT) {
            // It accepts TCP but the pool got no connection: the server does not answer.
            Ok(_) => return ConnectFailure::TimedOut,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => refused = true,
            Err(_) => return ConnectFailure::TimedOut,
        }
    }
    if refused {
        ConnectFailure::Refused
    } else {
        ConnectFailure::TimedOut
    }
}
