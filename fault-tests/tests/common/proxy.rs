//! A TCP proxy on loopback between one service instance and the database, with a switch that
//! cuts the link: a network partition the test controls.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Proxy {
    port: u16,
    cut: Arc<watch::Sender<bool>>,
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
        let cut = Arc::new(watch::Sender::new(false));
        let switch = cut.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *switch.borrow() {
                    // Cut: refuse by closing at once; the client sees an error immediately.
                    drop(client);
                    continue;
                }
                let mut cut = switch.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.wait_for(|cut| *cut) => {}
                    }
                    // Both sockets close here: a cut link fails its pending and next queries.
                });
            }
        });
        Proxy { port, cut, accept }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes every open connection and refuses new ones until [`heal`](Self::heal).
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut.send_replace(true);
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
