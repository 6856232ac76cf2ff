//! A minimal HTTP client for tests that talk to a service's endpoints (`/metrics`, `/healthz`,
//! Prometheus's API): one `GET` over HTTP/1.0, so there is no chunked body to decode.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `GET path` from `address` (`"127.0.0.1:9000"` or `("127.0.0.1", port)`); the status code and
/// the body. A reply is awaited for at most 10 s.
///
/// ```no_run
/// let (status, body) = test_support::http::get(("127.0.0.1", 9000), "/metrics")?;
/// assert_eq!(status, 200, "{body}");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn get(address: impl ToSocketAddrs, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let host = stream.peer_addr()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {response:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head:?}")))?;
    Ok((status, body.to_owned()))
}
