//! A database host that accepts nothing back (the proxy's dark link: packets dropped, nothing
//! closed) fails a service's start-up within the provider's connect timeout, not after TCP's
//! minutes.

mod common;

use std::time::{Duration, Instant};

use common::proxy::{Proxy, proxied, upstream_of};
use fault_tests::{Backend, SchemaAction};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_connect_through_a_dark_link_fails_within_the_default_timeout() {
    let url = common::mysql_url();
    let upstream = upstream_of(&url, 3306).await;
    if let Err(e) = tokio::net::TcpStream::connect(upstream).await {
        common::unreachable("mysql", &url, &e);
        return;
    }
    let proxy = Proxy::start(upstream).await;
    proxy.darken();
    let backend = Backend::MySql(proxied(&url, proxy.port()));
    let started = Instant::now();
    let opened = tokio::time::timeout(
        Duration::from_secs(30),
        backend.lock_provider("ft_dark_connect", SchemaAction::Create),
    )
    .await;
    let elapsed = started.elapsed();
    let error = match opened {
        Err(_) => panic!("the connect still hung after 30 s: no connect timeout"),
        Ok(Ok(_)) => panic!("connected through a dark link"),
        Ok(Err(error)) => common::chain(&error),
    };
    // Two layers give up at the same 10 s: the provider's own connect timeout and the
    // `lock-providers` deadline around the whole open; whichever timer fires first words the
    // error, and both name the 10 s (CI saw the second once).
    assert!(
        error.contains("connect timeout of 10s")
            || error.contains("no connection and handshake within 10 s"),
        "{error}"
    );
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(15)).contains(&elapsed),
        "gave up after {elapsed:?}, not after the 10 s default: {error}"
    );
}
