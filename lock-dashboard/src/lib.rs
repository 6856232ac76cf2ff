#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod actions;
mod api;
mod auth;
mod bounds;
mod charts;
mod ctx;
mod failure;
mod format;
mod host;
mod login_limit;
mod names;
mod overview;
mod pages;
mod read;
mod session;
mod state;
mod token;
mod unlock;
mod web;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use lock_cluster::{ClusterOptions, ClusterProvider};

pub use token::{Role, TOKENS_ENV, Token, TokenError, parse_token_file, parse_tokens};
pub use unlock::unlock_warning;

/// How often a page refreshes itself by default (a page's `?refresh=SECONDS` overrides it).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(5);

/// How many runs a page of a job's history shows by default.
pub const DEFAULT_PAGE_SIZE: u32 = 50;

/// The dashboard of `provider`'s cluster, read-only: every page and JSON endpoint, no action.
/// [`Dashboard`] configures tokens (which allow the actions) and the rest.
///
/// Mount it under a path of the service's own with [`Router::nest_service`] (which answers
/// `/scheduler` and `/scheduler/`; [`Router::nest`] answers `/scheduler` only):
///
/// ```
/// use lock_core::InMemoryLockProvider;
///
/// let app: axum::Router = axum::Router::new()
///     .nest_service("/scheduler", lock_dashboard::router(InMemoryLockProvider::new()));
/// # drop(app);
/// ```
pub fn router<P: ClusterProvider>(provider: P) -> Router {
    Dashboard::new(provider).router()
}

/// A dashboard being configured: the provider, the tokens that allow actions (each with its
/// [`Role`]), whether reads need a token, the host names it answers, how pages judge and
/// refresh.
///
/// ```
/// use lock_core::InMemoryLockProvider;
/// use lock_dashboard::{Dashboard, Token};
///
/// let app = Dashboard::new(InMemoryLockProvider::new())
///     .token(Token::new("alice", "a-long-random-secret-of-alice")?)
///     .refresh(std::time::Duration::from_secs(10))
///     .router();
/// # drop(app);
/// # Ok::<(), lock_dashboard::TokenError>(())
/// ```
#[derive(Clone)]
pub struct Dashboard {
    provider: Arc<dyn ClusterProvider>,
    tokens: Vec<Token>,
    require_auth: bool,
    allowed_hosts: Vec<String>,
    options: ClusterOptions,
    refresh: Duration,
    page_size: u32,
    bounds: bounds::Bounds,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("provider", &self.provider.describe())
            .field("tokens", &self.tokens)
            .field("require_auth", &self.require_auth)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("options", &self.options)
            .field("refresh", &self.refresh)
            .field("page_size", &self.page_size)
            .field("bounds", &self.bounds)
            .finish()
    }
}

impl Dashboard {
    /// A read-only dashboard of `provider` (any provider, or an `Arc` of one).
    pub fn new<P: ClusterProvider>(provider: P) -> Self {
        Dashboard {
            provider: Arc::new(provider),
            tokens: Vec::new(),
            require_auth: false,
            allowed_hosts: Vec::new(),
            options: ClusterOptions::default(),
            refresh: DEFAULT_REFRESH,
            page_size: DEFAULT_PAGE_SIZE,
            bounds: bounds::Bounds::default(),
        }
    }

    /// Allows the actions of `token`'s [`Role`] (viewer: none; operator: pause, resume,
    /// trigger; admin: also unlock) to whoever presents its secret; the token's name is logged
    /// and recorded with each action.
    pub fn token(mut self, token: Token) -> Self {
        self.tokens.push(token);
        self
    }

    /// [`token`](Self::token) for each of `tokens`.
    pub fn tokens(mut self, tokens: impl IntoIterator<Item = Token>) -> Self {
        self.tokens.extend(tokens);
        self
    }

    /// Whether every page and JSON read needs a session or a bearer token of any role (default
    /// off: a service that nests the dashboard behind its own authentication keeps it so).
    /// The login page and the assets stay open; a page without one redirects to the login
    /// page, `/api` answers 401. `lockctl serve` turns it on when it listens beyond loopback.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_dashboard::{Dashboard, Role, Token};
    ///
    /// let app = Dashboard::new(InMemoryLockProvider::new())
    ///     .token(Token::with_role("grafana", Role::Viewer, "a-long-random-secret-of-graf")?)
    ///     .require_auth(true)
    ///     .router();
    /// # drop(app);
    /// # Ok::<(), lock_dashboard::TokenError>(())
    /// ```
    pub fn require_auth(mut self, required: bool) -> Self {
        self.require_auth = required;
        self
    }

    /// Answers requests addressed to `name` (the `Host` header, any port) besides IP
    /// addresses and `localhost`, which are always answered. Every other name is refused
    /// (403): a web page cannot reach the dashboard by re-pointing a name of its own at it
    /// (DNS rebinding). Add the names operators type, such as the reverse proxy's.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_dashboard::Dashboard;
    ///
    /// let app = Dashboard::new(InMemoryLockProvider::new())
    ///     .allow_host("scheduler.internal.example")
    ///     .router();
    /// # drop(app);
    /// ```
    pub fn allow_host(mut self, name: impl AsRef<str>) -> Self {
        self.allowed_hosts.push(host::normal(name.as_ref()));
        self
    }

    /// A job whose next fire passed by more than this without a run is shown as missed
    /// (default [`lock_cluster::DEFAULT_MISSED_GRACE`]).
    pub fn missed_grace(mut self, grace: Duration) -> Self {
        self.options.missed_grace = grace;
        self
    }

    /// How often the pages refresh themselves (default [`DEFAULT_REFRESH`]; zero: never).
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every;
        self
    }

    /// How many runs a page of a job's history shows (default [`DEFAULT_PAGE_SIZE`], at least 1).
    pub fn page_size(mut self, runs: u32) -> Self {
        self.page_size = runs.max(1);
        self
    }

    /// The routes: the pages (`/`, `/jobs/{name}`, `/jobs/{name}/runs/{id}`, `/instances`,
    /// `/locks`), the JSON endpoints (`/api/...`) and the actions, relative to where the
    /// router is mounted.
    ///
    /// Serve it with `into_make_service_with_connect_info::<SocketAddr>()` so that login
    /// attempts are limited per client address (without it every client shares one limit).
    /// Mounted with [`Router::nest_service`], the mount point answers with and without a
    /// trailing slash (`/ops` and `/ops/`); [`Router::nest`] answers `/ops` only.
    pub fn router(self) -> Router {
        web::routes(state::Shared::new(self))
    }

    /// How long a request may take (default 10 s). A request still unanswered then, a page
    /// or JSON, is answered 503 with `{"error": "..."}` and `Retry-After: 1`, and the database
    /// reads it was waiting for are dropped: a lock database that stopped answering costs a
    /// fast 503, not a request held for minutes. `Duration::ZERO`: no timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// let app = lock_dashboard::Dashboard::new(lock_core::InMemoryLockProvider::new())
    ///     .request_timeout(Duration::from_secs(5))
    ///     .router();
    /// # drop(app);
    /// ```
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.bounds.request_timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// How many requests are served at once (default 256, at least 1); a request beyond that
    /// is answered 503 at once with `{"error": "..."}` and `Retry-After: 1`, rather than
    /// queued, so a flood neither piles up work on the lock database nor makes every caller
    /// wait.
    ///
    /// ```
    /// let app = lock_dashboard::Dashboard::new(lock_core::InMemoryLockProvider::new())
    ///     .max_concurrent_requests(64)
    ///     .router();
    /// # drop(app);
    /// ```
    pub fn max_concurrent_requests(mut self, requests: usize) -> Self {
        self.bounds.max_concurrent_requests = requests.max(1);
        self
    }
}
