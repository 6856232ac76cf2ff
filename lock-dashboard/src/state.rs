//! What every handler shares: the provider, the tokens, who may read, the hosts answered, how
//! pages judge and refresh, the sessions and the login attempts.

use std::sync::Arc;
use std::time::Duration;

use lock_cluster::{ClusterOptions, ClusterProvider};

use crate::Dashboard;
use crate::login_limit::LoginLimit;
use crate::overview::OverviewReads;
use crate::session::Sessions;
use crate::token::Token;

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) provider: Arc<dyn ClusterProvider>,
    pub(crate) tokens: Vec<Token>,
    pub(crate) require_auth: bool,
    /// Names answered besides IP literals and `localhost` (normalised: `host::normal`).
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) options: ClusterOptions,
    pub(crate) refresh: Duration,
    pub(crate) page_size: u32,
    pub(crate) sessions: Sessions,
    pub(crate) login_limit: LoginLimit,
    pub(crate) bounds: crate::bounds::Bounds,
    /// The Jobs page's reads, shared by the requests that wait for the same one.
    pub(crate) overview: OverviewReads,
}

impl Shared {
    pub(crate) fn new(dashboard: Dashboard) -> Self {
        Shared {
            provider: dashboard.provider,
            tokens: dashboard.tokens,
            require_auth: dashboard.require_auth,
            allowed_hosts: dashboard.allowed_hosts,
            options: dashboard.options,
            refresh: dashboard.refresh,
            page_size: dashboard.page_size,
            sessions: Sessions::default(),
            login_limit: LoginLimit::default(),
            bounds: dashboard.bounds,
            overview: OverviewReads::default(),
        }
    }
}

pub(crate) type AppState = Arc<Shared>;
