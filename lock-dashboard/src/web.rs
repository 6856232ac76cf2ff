//! The router, what every request carries (where the dashboard is mounted, who is signed in,
//! how often the page refreshes), failures as pages or JSON, and the security headers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use lock_cluster::{ClusterOptions, ClusterProvider};
use lock_core::LockError;

use crate::auth::{self, Session, Sessions};
use crate::token::Token;
use crate::{Dashboard, api, pages};

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) provider: Arc<dyn ClusterProvider>,
    pub(crate) tokens: Vec<Token>,
    pub(crate) options: ClusterOptions,
    pub(crate) refresh: Duration,
    pub(crate) page_size: u32,
    pub(crate) sessions: Sessions,
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
        }
    }
}

pub(crate) type AppState = Arc<Shared>;

const SCRIPT: &str = include_str!("../assets/dashboard.js");
const STYLE: &str = include_str!("../assets/dashboard.css");

pub(crate) fn routes(shared: Shared) -> Router {
    Router::new()
        .route("/", get(pages::jobs::page))
        .route("/jobs/{name}", get(pages::job::page))
        .route("/jobs/{name}/{action}", post(pages::forms::job_action))
        .route("/instances", get(pages::instances::page))
        .route("/locks", get(pages::locks::page))
        .route(
            "/locks/{name}/unlock",
            get(pages::locks::confirm).post(pages::forms::unlock),
        )
        .route("/login", get(pages::login::page).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(style))
        .route("/api/jobs", get(api::jobs))
        .route("/api/jobs/{name}/runs", get(api::runs))
        .route("/api/jobs/{name}/actions", get(api::actions))
        .route("/api/jobs/{name}/{action}", post(api::job_action))
        .route("/api/instances", get(api::instances))
        .route("/api/locks", get(api::locks))
        .route("/api/locks/{name}/unlock", post(api::unlock))
        .layer(middleware::map_response(security_headers))
        .with_state(Arc::new(shared))
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}

/// Nothing from elsewhere: scripts and styles are the dashboard's own files, no frame embeds
/// it (clickjacking), forms post only to it.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
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
            session: auth::session_of(state, &parts.headers),
            actions_enabled: !state.tokens.is_empty(),
        })
    }
}

/// A request that cannot be answered as asked: the status and what to tell the caller.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
        }
    }

    /// A failed read or write on the provider, with what was being done.
    pub(crate) fn provider(context: String, error: LockError) -> Self {
        let status = match error {
            LockError::InvalidLockName { .. } => StatusCode::BAD_REQUEST,
            LockError::TableMissing { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Failure::new(status, format!("{context}: {error}"))
    }

    pub(crate) fn no_operations(provider: &dyn ClusterProvider) -> Self {
        Failure::new(
            StatusCode::NOT_IMPLEMENTED,
            format!(
                "{} has no operations tables (job registry, run history, pause, trigger): this \
                 provider does not keep them; only the Locks page works",
                provider.describe()
            ),
        )
    }
}

/// A [`Failure`] answered as a page.
pub(crate) struct PageFailure(pub(crate) Failure);

impl From<Failure> for PageFailure {
    fn from(failure: Failure) -> Self {
        PageFailure(failure)
    }
}

impl IntoResponse for PageFailure {
    fn into_response(self) -> Response {
        (self.0.status, pages::layout::failure(&self.0)).into_response()
    }
}

/// A [`Failure`] answered as JSON: `{"error": "..."}`.
pub(crate) struct ApiFailure(pub(crate) Failure);

impl From<Failure> for ApiFailure {
    fn from(failure: Failure) -> Self {
        ApiFailure(failure)
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        (
            self.0.status,
            Json(serde_json::json!({ "error": self.0.message })),
        )
            .into_response()
    }
}

/// `name` as one path segment: everything but unreserved characters percent-encoded.
pub(crate) fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The job names the operations tables keep: 1 to 255 bytes.
pub(crate) fn check_job_name(name: &str) -> Result<(), Failure> {
    let max = lock_cluster::MAX_TEXT_LEN;
    if name.is_empty() || name.len() > max {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            format!("job name {name:?}: a job name is 1 to {max} bytes"),
        ));
    }
    Ok(())
}
