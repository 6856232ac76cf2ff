//! `lockctl serve`'s HTTP server: the dashboard's router on hyper's HTTP/1 connections, with
//! the bounds `axum::serve` does not have, so that idle or slow clients cannot hold the
//! process's connections (and file descriptors) for ever.
//!
//! Decisions, and why:
//! - hyper's `header_read_timeout`: its timer runs whenever a connection waits for a request's
//!   headers, from the connection's start and again after each answer, so it bounds a
//!   slow-header client and an idle keep-alive connection alike ([`HEADER_READ_TIMEOUT`]).
//! - A connection limit ([`MAX_CONNECTIONS`]): beyond it the server stops accepting, and new
//!   connections wait in the kernel's listen queue until one closes (at most the header-read
//!   timeout for an idle one), rather than being refused.
//! - Accept errors (out of file descriptors, above all) pause the loop briefly instead of
//!   ending the server, as `axum::serve` does.
//! - Handlers see the peer's address (`ConnectInfo<SocketAddr>`), as with
//!   `into_make_service_with_connect_info`.
//! - Shutdown: stop accepting, let each connection finish its request, at most
//!   [`SHUTDOWN_GRACE`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_service::Service;

/// How long a connection may take to send a request's headers, counted from when it opened
/// or its previous answer was sent: a slow-header or idle keep-alive connection is closed then.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How many connections are served at once.
const MAX_CONNECTIONS: usize = 256;

/// How long shutdown waits for the requests under way.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long the loop pauses after a failed accept (typically: no file descriptor left).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown` resolves, then lets the requests under way end.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut make_service = app.into_make_service_with_connect_info::<SocketAddr>();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.map_err(std::io::Error::other)?,
            () = &mut shutdown => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "lockctl serve: cannot accept a connection");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        std::future::poll_fn(|cx| Service::<SocketAddr>::poll_ready(&mut make_service, cx))
            .await
            .unwrap_or_else(|never| match never {});
        let service = make_service
            .call(remote)
            .await
            .unwrap_or_else(|never| match never {});
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that went away or timed out is not the server's failure.
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {}
    }
    Ok(())
}
