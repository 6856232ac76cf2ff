//! A TCP proxy on loopback between one service instance and the database, with a switch that
//! breaks the link: a network partition the test controls.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The state of a proxied link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Bytes flow.
    Up,
    /// Open connections are closed and new ones refused: the client sees errors at once.
    Cut,
    /// Nothing is delivered, nothing is closed (packets dropped, as most real partitions do):
    /// bytes sent are held and delivered when the link comes [`Up`](Link::Up) again, new
    /// connections are accepted but get no answer.
    Dark,
}

pub struct Proxy {
    port: u16,
    link: Arc<watch::Sender<Link>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        assert!(
            upstream.ip().is_loopback(),
            "the proxy only forwards to loopback"
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let link = Arc::new(watch::Sender::new(Link::Up));
        let state = link.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *state.borrow() == Link::Cut {
                    drop(client);
                    continue;
                }
                let state = state.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pump(client_read, server_write, state.clone()),
                        pump(server_read, client_write, state),
                    );
                    // Both halves of both sockets are dropped here: a cut link fails its
                    // pending and next queries.
                });
            }
        });
        Proxy { port, link, accept }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes every open connection and refuses new ones until [`heal`](Self::heal).
    pub fn cut(&self) {
        self.link.send_replace(Link::Cut);
    }

    /// Delivers nothing and closes nothing until [`heal`](Self::heal).
    pub fn darken(&self) {
        self.link.send_replace(Link::Dark);
    }

    pub fn heal(&self) {
        self.link.send_replace(Link::Up);
    }
}

/// Copies `from` to `to` while the link allows: holds bytes while it is dark, stops when it
/// is cut or either side closes.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut link: watch::Receiver<Link>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            _ = link.wait_for(|l| *l == Link::Cut) => return,
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        let up = matches!(
            link.wait_for(|l| *l != Link::Dark).await.map(|l| *l),
            Ok(Link::Up)
        );
        if !up {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.link.send_replace(Link::Cut);
    }
}

/// The `host:port` a database URL points to (loopback in these tests).
pub async fn upstream_of(url: &str, default_port: u16) -> SocketAddr {
    let (_, authority) = split_authority(url);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let target = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    };
    tokio::net::lookup_host(&target)
        .await
        .unwrap_or_else(|e| panic!("resolve {target}: {e}"))
        .find(|a| a.is_ipv4())
        .unwrap_or_else(|| panic!("no IPv4 address for {target}"))
}

/// `url` pointing at `127.0.0.1:port` instead of its server (user, database and parameters
/// kept).
pub fn via_port(url: &str, port: u16) -> String {
    let (scheme, authority) = split_authority(url);
    let rest = &url[scheme.len() + 3 + authority.len()..];
    let user = match authority.rsplit_once('@') {
        Some((user, _)) => format!("{user}@"),
        None => String::new(),
    };
    format!("{scheme}://{user}127.0.0.1:{port}{rest}")
}

/// `url` through the proxy listening on `port`. A MySQL URL also gets `prefer_socket=false`:
/// mysql_async reconnects over the server's Unix socket when it reaches 127.0.0.1 by TCP (on by
/// default), which would bypass the proxy.
pub fn proxied(url: &str, port: u16) -> String {
    let url = via_port(url, port);
    if !url.starts_with("mysql:") {
        return url;
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}prefer_socket=false")
}

/// `(scheme, authority)` of `scheme://authority/path?query`.
fn split_authority(url: &str) -> (&str, &str) {
    let (scheme, after) = url.split_once("://").expect("a URL with a scheme");
    let end = after.find(['/', '?']).unwrap_or(after.len());
    (scheme, &after[..end])
}

#[test]
fn urls_are_rewritten_to_the_proxy() {
    assert_eq!(
        via_port("postgres://postgres@127.0.0.1:5432/test", 4000),
        "postgres://postgres@127.0.0.1:4000/test"
    );
    assert_eq!(
        via_port("mysql://root:pw@localhost/test?x=1", 4000),
        "mysql://root:pw@127.0.0.1:4000/test?x=1"
    );
}
