//! A request that cannot be answered as asked, and how it is answered: as a page or as JSON.
//! Under `/api` every failure is `{"error": ...}`, axum's own rejections (a bad query, path,
//! form or body: 400, 405, 413, 415, 422) included; elsewhere they are pages.

use axum::Json;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lock_cluster::ClusterProvider;
use lock_core::LockError;

use maud::{DOCTYPE, Markup, html};

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
            LockError::TableMissing { .. } | LockError::Timeout { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
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
        (self.0.status, failure(&self.0)).into_response()
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

/// A failure, as a page of its own.
pub(crate) fn failure(failure: &Failure) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Error · scheduled-locks" } }
            body {
                main {
                    h1 { (failure.status.as_u16()) " " (failure.status.canonical_reason().unwrap_or("")) }
                    p.failure { (failure.message) }
                }
            }
        }
    }
}

/// The largest rejection text read back to be wrapped in JSON (axum's are a line).
const REJECTION_TEXT_LIMIT: usize = 16 * 1024;

/// Middleware: a failure that is neither JSON nor a page yet (one of axum's rejections, a 405)
/// becomes `{"error": "<its text>"}` under `/api` and a failure page elsewhere, with the same
/// status and headers.
pub(crate) async fn in_kind(request: Request, next: Next) -> Response {
    let api = crate::ctx::is_api(request.uri().path());
    let response = next.run(request).await;
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let answered = kind.starts_with("application/json") || kind.starts_with("text/html");
    if answered || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, REJECTION_TEXT_LIMIT)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let message = match text.is_empty() {
        true => status.canonical_reason().unwrap_or("failed").to_owned(),
        false => text,
    };
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    let failure = Failure::new(status, message);
    let mut answer = match api {
        true => ApiFailure(failure).into_response(),
        false => PageFailure(failure).into_response(),
    };
    answer.headers_mut().extend(parts.headers);
    answer
}
