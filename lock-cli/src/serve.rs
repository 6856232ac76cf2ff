//! `serve --listen ADDR`: the web dashboard (`lock-dashboard`) of the cluster `--url` names,
//! until Ctrl-C or SIGTERM. Who may read and act ([`Access`]) is settled before the database
//! is reached: tokens from `--token-file`, `LOCKCTL_DASHBOARD_TOKENS` and `--token` (which
//! shows in `ps`, so it warns), reads protected beyond loopback, the host names answered.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::LockProvider;
use lock_dashboard::{Dashboard, TOKENS_ENV, Token};

use crate::Failure;
use crate::cli::ServeAccess;

/// Who may read and act on the dashboard, and which names it answers.
#[derive(Debug)]
pub(crate) struct Access {
    tokens: Vec<Token>,
    allowed_hosts: Vec<String>,
    require_auth: bool,
    /// Why reads are (or are not) protected, for the start line.
    reads: String,
}

impl Access {
    /// The tokens of every source, and whether reads need one. No message repeats a secret.
    pub(crate) fn settle(args: &ServeAccess, listen: SocketAddr) -> Result<Self, Failure> {
        let mut tokens = Vec::new();
        if let Some(path) = &args.token_file {
            tokens.extend(token_file(path)?);
        }
        if let Some(list) = std::env::var_os(TOKENS_ENV) {
            let list = list
                .into_string()
                .map_err(|_| Failure::usage(format!("{TOKENS_ENV}: not UTF-8")))?;
            tokens.extend(
                lock_dashboard::parse_tokens(&list)
                    .map_err(|e| Failure::usage(format!("{TOKENS_ENV}: {e}")))?,
            );
        }
        if !args.tokens.is_empty() {
            eprintln!(
                "lockctl: warning: --token shows its secret to every user of this machine (ps, \
                 /proc) and in the shell's history: put tokens in a file (--token-file PATH, \
                 one name[:role]=secret a line) or in {TOKENS_ENV}"
            );
            tokens.extend(args.tokens.iter().cloned());
        }
        let loopback = listen.ip().is_loopback();
        let (require_auth, reads) = match (args.require_auth, args.public_reads, loopback) {
            (true, _, _) => (true, "reads need a token (--require-auth)"),
            (_, true, _) => (false, "reads open to whoever reaches it (--public-reads)"),
            (_, _, true) => (
                false,
                "reads open on loopback (--require-auth protects them)",
            ),
            (_, _, false) => (
                true,
                "reads need a token, as it listens beyond loopback (--public-reads opens them)",
            ),
        };
        if require_auth && tokens.is_empty() {
            return Err(Failure::usage(format!(
                "{reads}, but no token is configured: give a viewer token at least \
                 (--token-file PATH or {TOKENS_ENV}), or --public-reads"
            )));
        }
        Ok(Access {
            tokens,
            allowed_hosts: args.allowed_hosts.clone(),
            require_auth,
            reads: reads.to_owned(),
        })
    }

    /// `actions allowed to tokens ops (admin), vera (viewer)`, or read-only.
    fn described(&self) -> String {
        if self.tokens.is_empty() {
            return "read-only (no token)".to_owned();
        }
        let names: Vec<String> = self
            .tokens
            .iter()
            .map(|t| format!("{} ({})", t.name(), t.role()))
            .collect();
        format!("actions allowed to tokens {}", names.join(", "))
    }
}

/// The tokens of `path`; a warning when others may read it.
fn token_file(path: &Path) -> Result<Vec<Token>, Failure> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("--token-file {shown}: {e}")))?;
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            eprintln!(
                "lockctl: warning: --token-file {shown} is readable by others (mode {mode:o}): \
                 chmod 600 {shown}"
            );
        }
    }
    lock_dashboard::parse_token_file(&text)
        .map_err(|e| Failure::usage(format!("--token-file {shown}: {e}")))
}

/// Serves the dashboard of `provider` on `listen`; returns when a shutdown signal arrives.
pub(crate) async fn run(
    provider: Arc<dyn ClusterProvider>,
    listen: SocketAddr,
    access: &Access,
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
    let mut dashboard = Dashboard::new(provider)
        .tokens(access.tokens.iter().cloned())
        .require_auth(access.require_auth);
    for name in &access.allowed_hosts {
        dashboard = dashboard.allow_host(name);
    }
    let app = dashboard.missed_grace(grace).refresh(refresh).router();
    eprintln!(
        "lockctl: dashboard of {described} on http://{address}/, {}; {}",
        access.described(),
        access.reads
    );
    if !address.ip().is_loopback() {
        eprintln!(
            "lockctl: warning: listening on {address}, not loopback: it speaks plain HTTP, so \
             put TLS in front of it{}",
            match access.require_auth {
                true => "",
                false => "; whoever reaches it sees every job, instance and error text",
            }
        );
    }
    crate::http_server::serve(listener, app, lock_scheduler::shutdown_signal())
        .await
        .map_err(|e| Failure::runtime_message(format!("the dashboard on {address} failed: {e}")))
}
