//! The router: which page, JSON endpoint or action answers each path, the dashboard's own
//! script and style, and the security headers on every answer.

use std::sync::Arc;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};

use crate::state::Shared;
use crate::{api, pages};

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
        .route("/login", get(pages::login::page).post(pages::login::login))
        .route("/logout", post(pages::login::logout))
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(style))
        .route("/api/jobs", get(api::jobs))
        .route("/api/jobs/{name}/runs", get(api::runs))
        .route("/api/jobs/{name}/actions", get(api::actions))
        .route("/api/jobs/{name}/{action}", post(api::job_action))
        .route("/api/instances", get(api::instances))
        .route("/api/locks", get(api::locks))
        .route("/api/locks/{name}/unlock", post(api::unlock))
        .layer(crate::bounds::layer(&shared.bounds))
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
