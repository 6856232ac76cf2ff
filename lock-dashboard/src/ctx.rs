//! What a page knows about its request: where the dashboard is mounted, the way back here, how
//! often the page refreshes, who is signed in.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use crate::session::{COOKIE, Session};
use crate::state::AppState;
use crate::token::Role;

/// Whether `path` (below the mount point) is one of the JSON endpoints, whose every answer,
/// failures included, is JSON.
pub(crate) fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// What a page needs to know about its request.
pub(crate) struct Ctx {
    /// Where the dashboard is mounted (`/scheduler`, or empty at the root).
    pub(crate) base: String,
    /// The path and query of this page below `base`, for a form's way back.
    pub(crate) here: String,
    /// Seconds between refreshes (0: never).
    pub(crate) refresh: u64,
    /// The signed-in browser's session.
    pub(crate) session: Option<(String, Session)>,
    /// Whether any token is configured (otherwise the dashboard is read-only).
    pub(crate) actions_enabled: bool,
}

impl Ctx {
    /// `path` (starting with `/`) below where the dashboard is mounted.
    pub(crate) fn link(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The Jobs page.
    pub(crate) fn home(&self) -> String {
        if self.base.is_empty() {
            "/".to_owned()
        } else {
            self.base.clone()
        }
    }

    /// The signed-in session, when actions may be offered.
    pub(crate) fn signed_in(&self) -> Option<&Session> {
        self.session.as_ref().map(|(_, session)| session)
    }

    /// Whether the signed-in session may take the actions of `role` (so its buttons show).
    pub(crate) fn may(&self, role: Role) -> bool {
        self.signed_in().is_some_and(|session| session.role >= role)
    }
}

impl FromRequestParts<AppState> for Ctx {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        let inner = parts.uri.path().to_owned();
        let full = parts
            .extensions
            .get::<OriginalUri>()
            .map(|original| original.0.path().to_owned())
            .unwrap_or_else(|| inner.clone());
        let base = if inner == "/" {
            full.trim_end_matches('/').to_owned()
        } else {
            full.strip_suffix(inner.as_str()).unwrap_or("").to_owned()
        };
        let query = parts.uri.query().unwrap_or("");
        let refresh = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("refresh="))
            .and_then(|seconds| seconds.parse::<u64>().ok())
            .map(|seconds| seconds.min(3600))
            .unwrap_or(state.refresh.as_secs());
        let here = match parts.uri.query() {
            Some(query) => format!("{inner}?{query}"),
            None => inner,
        };
        Ok(Ctx {
            base,
            here,
            refresh,
            session: session_of(state, &parts.headers),
            actions_enabled: !state.tokens.is_empty(),
        })
    }
}

/// The session the request's cookie names, if it is live.
pub(crate) fn session_of(state: &AppState, headers: &HeaderMap) -> Option<(String, Session)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .find_map(|id| state.sessions.get(id).map(|s| (id.to_owned(), s)))
}
