//! `serve --listen ADDR`: the web dashboard (`lock-dashboard`) of the cluster `--url` names,
//! until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::LockProvider;
use lock_dashboard::{Dashboard, Token};

use crate::Failure;

/// Serves the dashboard of `provider` on `listen`; returns when a shutdown signal arrives.
pub(crate) async fn run(
    provider: Arc<dyn ClusterProvider>,
    listen: SocketAddr,
    tokens: &[Token],
    grace: Duration,
    refresh: Duration,
) -> Result<(), Failure> {
    // The audit lines (`lock_dashboard::audit`: who paused, triggered, unlocked) go to stderr.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::runtime_message(format!("cannot listen on {listen}: {e}")))?;
    let address = listener
        .local_addr()
        .map_err(|e| Failure::runtime_message(format!("cannot listen on {listen}: {e}")))?;
    let described = provider.describe();
    let app = Dashboard::new(provider)
        .tokens(tokens.iter().cloned())
        .missed_grace(grace)
        .refresh(refresh)
        .router();
    let access = if tokens.is_empty() {
        "read-only (no --token)".to_owned()
    } else {
        let names: Vec<&str> = tokens.iter().map(Token::name).collect();
        format!("actions allowed to tokens {}", names.join(", "))
    };
    eprintln!("lockctl: dashboard of {described} on http://{address}/, {access}");
    if !address.ip().is_loopback() {
        eprintln!(
            "lockctl: warning: listening on {address}, not loopback: whoever reaches it sees \
             every job, instance and error text; put TLS in front of it"
        );
    }
    crate::http_server::serve(listener, app, lock_scheduler::shutdown_signal())
        .await
        .map_err(|e| Failure::runtime_message(format!("the dashboard on {address} failed: {e}")))
}
