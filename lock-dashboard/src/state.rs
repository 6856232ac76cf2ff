//! What every handler shares: the provider, the tokens, how pages judge and refresh, the
//! sessions.

use std::sync::Arc;
use std::time::Duration;

use lock_cluster::{ClusterOptions, ClusterProvider};

use crate::Dashboard;
use crate::read::OverviewReads;
use crate::session::Sessions;
use crate::token::Token;

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) provider: Arc<dyn ClusterProvider>,
    pub(crate) tokens: Vec<Token>,
    pub(crate) options: ClusterOptions,
    pub(crate) refresh: Duration,
    pub(crate) page_size: u32,
    pub(crate) sessions: Sessions,
    /// The Jobs page's reads, shared by the requests that wait for the same one.
    pub(crate) overview: OverviewReads,
}

impl Shared {
    pub(crate) fn new(dashboard: Dashboard) -> Self {
        Shared {
            provider: dashboard.provider,
            tokens: dashboard.tokens,
            options: dashboard.options,
            refresh: dashboard.refresh,
            page_size: dashboard.page_size,
            sessions: Sessions::default(),
            overview: OverviewReads::default(),
        }
    }
}

pub(crate) type AppState = Arc<Shared>;
