//! A request that cannot be answered as asked, and how it is answered: as a page or as JSON.

use axum::Json;
use axum::http::StatusCode;
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
