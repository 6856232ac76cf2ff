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

/// A reply to [`request`]: status, header lines (names lower-cased) and body.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Each header as (lower-cased name, value), in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `method path` to `address` with extra `headers` and `body` (a `Content-Length` is added
/// when the body is not empty), over HTTP/1.0; a reply is awaited for at most 10 s.
///
/// ```no_run
/// let reply = test_support::http::request(
///     ("127.0.0.1", 8080),
///     "POST",
///     "/api/jobs/report/pause",
///     &[("Authorization", "Bearer secret")],
///     "",
/// )?;
/// assert_eq!(reply.status, 200, "{}", reply.body);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn request(
    address: impl ToSocketAddrs,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let host = stream.peer_addr()?;
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {host}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {response:?}")))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head:?}")))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: body.to_owned(),
    })
}
