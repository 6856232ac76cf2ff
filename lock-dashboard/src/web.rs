//! The router: which page, JSON endpoint or action answers each path, the dashboard's own
//! script and style, what answers an unknown path, and the layers on every answer (the `Host`
//! allow-list, JSON failures under `/api`, the security headers).

use std::sync::Arc;

use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Router, middleware};

use crate::ctx::{Ctx, is_api};
use crate::failure::{ApiFailure, Failure, PageFailure};
use crate::state::Shared;
use crate::{api, auth, failure, host, pages};

const SCRIPT: &str = include_str!("../assets/dashboard.js");
const STYLE: &str = include_str!("../assets/dashboard.css");
/// The tab's icon: named by every page, so the browser asks for no `/favicon.ico` (a 404 in
/// its console, and the host app's path when the dashboard is nested).
const ICON: &str = include_str!("../assets/favicon.svg");

pub(crate) fn routes(shared: Shared) -> Router {
    let state = Arc::new(shared);
    // Everything but the login page and the assets: behind `Dashboard::require_auth`.
    let protected = Router::new()
        .route("/", get(pages::jobs::page))
        .route("/jobs/{name}", get(pages::job::page))
        .route("/jobs/{name}/runs/{id}", get(pages::run::page))
        .route("/run", get(pages::run::page_by_query))
        .route("/jobs/{name}/{action}", post(pages::forms::job_action))
        // `.` and `..`, which a browser removes from a path.
        .route("/job", get(pages::job::page_by_query))
        .route("/job/{action}", post(pages::forms::job_action_by_query))
        .route(
            "/lock/unlock",
            get(pages::locks::confirm_by_query).post(pages::forms::unlock_by_query),
        )
        .route("/instances", get(pages::instances::page))
        .route("/locks", get(pages::locks::page))
        .route(
            "/locks/{name}/unlock",
            get(pages::locks::confirm).post(pages::forms::unlock),
        )
        .route("/api/jobs", get(api::jobs))
        .route("/api/jobs/{name}/runs", get(api::runs))
        .route("/api/jobs/{name}/actions", get(api::actions))
        .route("/api/jobs/{name}/{action}", post(api::job_action))
        .route("/api/instances", get(api::instances))
        .route("/api/locks", get(api::locks))
        .route("/api/locks/{name}/unlock", post(api::unlock))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::reads,
        ));
    Router::new()
        .merge(protected)
        .route("/login", get(pages::login::page).post(pages::login::login))
        .route("/logout", post(pages::login::logout))
        .route("/assets/dashboard.js", get(script))
        .route("/assets/dashboard.css", get(style))
        .route("/assets/favicon.svg", get(icon))
        .fallback(unknown)
        .layer(middleware::from_fn(failure::in_kind))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            host::allowed,
        ))
        .layer(crate::bounds::layer(&state.bounds))
        .layer(middleware::map_response(security_headers))
        .with_state(state)
}

/// An unknown path: 404, as JSON under `/api` and as a page elsewhere.
async fn unknown(ctx: Ctx, method: Method, uri: Uri) -> Response {
    let path = uri.path();
    let failure = Failure::new(
        StatusCode::NOT_FOUND,
        format!("nothing answers {method} {:?} here", ctx.link(path)),
    );
    if is_api(path) {
        ApiFailure(failure).into_response()
    } else {
        PageFailure(failure).into_response()
    }
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

async fn icon() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "image/svg+xml")], ICON)
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
