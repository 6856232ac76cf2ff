//! What one request may cost the dashboard: how long it may take, how many are served at once,
//! how large a body may be. A lock database that stalls, or a flood of requests, then costs
//! the caller a fast 503 with the JSON error shape (`{"error": "..."}`), never a request held
//! for minutes or a process that runs out of memory or connections.
//!
//! Decisions, and why:
//! - tower's layers (`Timeout`, `LoadShed` over a global `ConcurrencyLimit`) and axum's
//!   `HandleErrorLayer` and `DefaultBodyLimit`, not hand-written ones.
//! - Shed, not queue: a request over the limit is answered 503 at once (`Retry-After: 1`), so
//!   a flood does not turn into requests that each wait the whole timeout.
//! - The timed-out request's future is dropped, so the statements it was waiting for are
//!   dropped with it: the request timeout is also the deadline of the database reads of a
//!   request (the database may still finish an action it had started).
//! - Pages get the same JSON answer as `/api`: a 503 page would say no more, and the page's
//!   refresh tries again.
//! - The body limit is small (64 KiB): the dashboard's forms carry a token and a CSRF field.

use std::future::Ready;
use std::time::Duration;

use axum::BoxError;
use axum::Json;
use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::load_shed::error::Overloaded;
use tower::timeout::TimeoutLayer;
use tower::timeout::error::Elapsed;

/// How long a request may take by default before it is answered 503.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How many requests are served at once by default; more are answered 503 at once.
pub(crate) const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 256;

/// The largest request body read, in bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// The bounds a dashboard was configured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// `None`: no request timeout (`Dashboard::request_timeout(Duration::ZERO)`).
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) max_concurrent_requests: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
        }
    }
}

/// The layers, outermost first: errors to answers, shedding, the limit, the timeout, the body
/// limit.
pub(crate) type BoundsLayer = (
    HandleErrorLayer<fn(BoxError) -> Ready<Response>, ()>,
    LoadShedLayer,
    GlobalConcurrencyLimitLayer,
    TimeoutLayer,
    DefaultBodyLimit,
);

/// The layer that applies `bounds` to every route of the dashboard (one limit for all of
/// them: axum applies a layer route by route, so the limit must be a global one).
pub(crate) fn layer(bounds: &Bounds) -> BoundsLayer {
    let handler: fn(BoxError) -> Ready<Response> = |error| std::future::ready(answer(error));
    (
        HandleErrorLayer::new(handler),
        LoadShedLayer::new(),
        GlobalConcurrencyLimitLayer::new(bounds.max_concurrent_requests),
        // tokio clamps a deadline past the end of its clock to "never".
        TimeoutLayer::new(bounds.request_timeout.unwrap_or(Duration::MAX)),
        DefaultBodyLimit::max(MAX_BODY_BYTES),
    )
}

/// A request that timed out or was shed, answered as every dashboard failure is.
fn answer(error: BoxError) -> Response {
    let (status, message) = if error.is::<Elapsed>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "no answer within the dashboard's request timeout: the lock database is slow or \
             not answering"
                .to_owned(),
        )
    } else if error.is::<Overloaded>() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests at once: try again in a moment".to_owned(),
        )
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request failed: {error}"),
        )
    };
    let mut response = (status, Json(serde_json::json!({ "error": message }))).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}
