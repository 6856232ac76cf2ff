//! Who may read and act, over HTTP against the real PostgreSQL: the roles of tokens and
//! sessions, protected reads, the `Host` allow-list (DNS rebinding), the login limit, and how
//! the dashboard answers what it refuses (JSON under `/api`, 400 for a bad name, a safe way
//! back).

mod common;

use common::{ALICE_SECRET, EVIL_JOB, call, call_as, csrf, json, json_error, login, page, serve};
use lock_cluster::ClusterProvider;
use lock_core::LockProvider;
use lock_dashboard::{Dashboard, Role, Token};

const VIEWER_SECRET: &str = "vera-secret-0123456789";
const OPERATOR_SECRET: &str = "otto-secret-0123456789";
const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

fn tokens() -> Vec<Token> {
    vec![
        Token::new("alice", ALICE_SECRET).expect("admin"),
        Token::with_role("vera", Role::Viewer, VIEWER_SECRET).expect("viewer"),
        Token::with_role("otto", Role::Operator, OPERATOR_SECRET).expect("operator"),
    ]
}

fn bearer(secret: &str) -> String {
    format!("Bearer {secret}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_may_take_only_its_actions() {
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    let store = served.provider.cluster().unwrap();
    let (vera, otto, alice) = (
        bearer(VIEWER_SECRET),
        bearer(OPERATOR_SECRET),
        bearer(ALICE_SECRET),
    );
    let as_ = |b: &str| vec![("Authorization", b.to_owned())];
    let post = |path: &'static str, auth: Vec<(&'static str, String)>| async move {
        let headers: Vec<(&str, &str)> = auth.iter().map(|(n, v)| (*n, v.as_str())).collect();
        call(address, "POST", path, &headers, "").await
    };

    // A viewer acts on nothing; the refusal names the role needed.
    for path in [
        "/api/jobs/report/pause",
        "/api/jobs/report/trigger",
        "/api/jobs/report/resume",
    ] {
        let refused = post(path, as_(&vera)).await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
        let error = json_error(&refused, path);
        assert!(
            error.contains("operator role") && error.contains("viewer"),
            "{error}"
        );
    }
    let unlock = "/api/locks/report/unlock?force=true";
    let refused = post(unlock, as_(&otto)).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(json_error(&refused, "unlock").contains("admin role"));
    assert!(
        store.control().await.unwrap().is_empty(),
        "a refused role paused"
    );
    assert!(
        served
            .provider
            .read_lock("report")
            .await
            .unwrap()
            .unwrap()
            .held
    );

    // An operator pauses, resumes and triggers; an admin also unlocks.
    let paused = post("/api/jobs/report/pause", as_(&otto)).await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    assert!(paused.body.contains("dashboard:otto"), "{}", paused.body);
    let resumed = post("/api/jobs/report/resume", as_(&otto)).await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let released = post(unlock, as_(&alice)).await;
    assert_eq!(released.status, 200, "{}", released.body);
    assert!(
        !served
            .provider
            .read_lock("report")
            .await
            .unwrap()
            .unwrap()
            .held
    );

    // The pages show each signed-in role only its buttons, and refuse a form above it.
    let viewer = login(address, "", VIEWER_SECRET).await;
    let jobs = page(address, "/", &[("Cookie", &viewer)]).await;
    assert!(
        jobs.contains("signed in as <strong>vera</strong>"),
        "{jobs}"
    );
    assert!(
        !jobs.contains(r#"class="pause""#),
        "a viewer sees a Pause button"
    );
    let token = csrf(&jobs);
    let form = format!("csrf={token}&back=%2F");
    let refused = call(
        address,
        "POST",
        "/jobs/report/pause",
        &[("Cookie", &viewer), FORM],
        &form,
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("operator role"), "{}", refused.body);
    assert!(store.control().await.unwrap().is_empty());

    let operator = login(address, "", OPERATOR_SECRET).await;
    let jobs = page(address, "/", &[("Cookie", &operator)]).await;
    assert!(jobs.contains(r#"class="pause""#), "{jobs}");
    let locks = page(address, "/locks", &[("Cookie", &operator)]).await;
    assert!(
        !locks.contains("Unlock…"),
        "an operator sees Unlock: {locks}"
    );
    let admin = login(address, "", ALICE_SECRET).await;
    // `report` was released above; `billing` holds no lease. Hold one again to show the link.
    let request = lock_core::testkit::request(
        &"report".into(),
        common::INSTANCE,
        std::time::Duration::from_secs(600),
        None,
    );
    served.provider.acquire(&request).await.expect("acquire");
    let locks = page(address, "/locks", &[("Cookie", &admin)]).await;
    assert!(locks.contains("Unlock…"), "{locks}");
    let confirm = page(address, "/locks/report/unlock", &[("Cookie", &operator)]).await;
    assert!(
        !confirm.contains("Release it anyway") && confirm.contains("needs the admin role"),
        "{confirm}"
    );
    let token = csrf(&page(address, "/", &[("Cookie", &operator)]).await);
    let refused = call(
        address,
        "POST",
        "/locks/report/unlock",
        &[("Cookie", &operator), FORM],
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        served
            .provider
            .read_lock("report")
            .await
            .unwrap()
            .unwrap()
            .held
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_reads_need_a_session_or_a_token_of_any_role() {
    let Some(served) = serve(|p| {
        axum::Router::new().nest_service(
            "/ops",
            Dashboard::new(p)
                .tokens(tokens())
                .require_auth(true)
                .router(),
        )
    })
    .await
    else {
        return;
    };
    let address = served.address;
    for path in [
        "/ops",
        "/ops/",
        "/ops/jobs/report",
        "/ops/instances",
        "/ops/locks",
    ] {
        let reply = call(address, "GET", path, &[], "").await;
        assert_eq!(
            (reply.status, reply.header("location")),
            (303, Some("/ops/login")),
            "{path}: {}",
            reply.body
        );
        assert!(!reply.body.contains("report"), "{path}: {}", reply.body);
    }
    for path in [
        "/ops/api/jobs",
        "/ops/api/jobs/report/runs",
        "/ops/api/jobs/report/actions",
        "/ops/api/instances",
        "/ops/api/locks",
    ] {
        let reply = call(address, "GET", path, &[], "").await;
        assert_eq!(reply.status, 401, "{path}: {}", reply.body);
        assert!(json_error(&reply, path).contains("Bearer"));
        let wrong = call(
            address,
            "GET",
            path,
            &[("Authorization", "Bearer not-a-token-of-this-one")],
            "",
        )
        .await;
        assert_eq!(wrong.status, 401, "{path}: {}", wrong.body);
        let viewer = bearer(VIEWER_SECRET);
        let read = call(address, "GET", path, &[("Authorization", &viewer)], "").await;
        assert_eq!(read.status, 200, "{path}: {}", read.body);
    }
    // The login page and the assets stay open; a session of any role reads.
    assert!(page(address, "/ops/login", &[]).await.contains("Log in"));
    assert_eq!(
        call(address, "GET", "/ops/assets/dashboard.css", &[], "")
            .await
            .status,
        200
    );
    let session = login(address, "/ops", VIEWER_SECRET).await;
    let jobs = page(address, "/ops/", &[("Cookie", &session)]).await;
    assert!(jobs.contains(r#"data-job="report""#), "{jobs}");
    assert!(jobs.contains(r#"href="/ops/jobs/report""#), "{jobs}");
    assert!(
        page(address, "/ops/jobs/report", &[("Cookie", &session)])
            .await
            .contains("Job report")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_every_page_and_endpoint() {
    let Some(served) = serve(|p| {
        Dashboard::new(p)
            .tokens(tokens())
            .allow_host("Dashboard.Internal.Example")
            .router()
    })
    .await
    else {
        return;
    };
    let address = served.address;
    let port = address.port();
    let evil = format!("evil.example:{port}");
    let origin = format!("http://{evil}");
    let alice = bearer(ALICE_SECRET);
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/jobs/report"),
        ("GET", "/instances"),
        ("GET", "/locks"),
        ("GET", "/locks/report/unlock"),
        ("GET", "/login"),
        ("GET", "/assets/dashboard.js"),
        ("GET", "/api/jobs"),
        ("GET", "/api/jobs/report/runs"),
        ("GET", "/api/jobs/report/actions"),
        ("GET", "/api/instances"),
        ("GET", "/api/locks"),
        ("POST", "/api/jobs/report/pause"),
        ("POST", "/api/locks/report/unlock?force=true"),
    ] {
        let reply = call_as(
            address,
            &evil,
            method,
            path,
            &[("Origin", &origin), ("Authorization", &alice)],
        )
        .await;
        assert_eq!(reply.status, 403, "{method} {path}: {}", reply.body);
        for secret in ["host-a", "report\"", "billing", "boom"] {
            assert!(
                !reply.body.contains(secret),
                "{path} shows {secret}: {}",
                reply.body
            );
        }
        let fix = "--allow-host evil.example";
        if path.starts_with("/api") {
            assert!(json_error(&reply, path).contains(fix), "{}", reply.body);
        } else {
            assert!(reply.body.contains(fix), "{path}: {}", reply.body);
        }
    }
    assert!(
        served
            .provider
            .cluster()
            .unwrap()
            .control()
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        served
            .provider
            .read_lock("report")
            .await
            .unwrap()
            .unwrap()
            .held
    );
    // IP literals, localhost and the allowed name, on any port.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("dashboard.internal.example:{port}"),
        "dashboard.internal.example".to_owned(),
    ] {
        let reply = call_as(address, &host, "GET", "/api/jobs", &[]).await;
        assert_eq!(reply.status, 200, "{host}: {}", reply.body);
    }
}

#[tokio::test]
async fn login_attempts_are_limited_per_client_address_and_each_failure_is_logged() {
    let (logs, guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    let attempt = |secret: &'static str| async move {
        call(
            address,
            "POST",
            "/login",
            &[FORM],
            &format!("token={secret}"),
        )
        .await
    };
    // The burst: ten attempts in a row are answered.
    for _ in 0..10 {
        let wrong = attempt("not-a-token-of-this-dashboard").await;
        assert_eq!(wrong.status, 403, "{}", wrong.body);
    }
    // Then 429 with Retry-After, even for the right secret, and no session.
    let limited = attempt(ALICE_SECRET).await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    let wait: u64 = limited
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(limited.header("set-cookie").is_none());
    drop(guard);
    let text = logs.text();
    let refusals: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("dashboard login refused: wrong token"))
        .collect();
    assert_eq!(refusals.len(), 10, "{text}");
    assert!(
        refusals.iter().all(
            |line| line.contains("client=127.0.0.1:") && line.contains("lock_dashboard::audit")
        ),
        "{text}"
    );
    assert!(text.contains("too many attempts"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_under_api_is_json_and_other_unknown_paths_a_page() {
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    let alice = bearer(ALICE_SECRET);
    let auth = ("Authorization", alice.as_str());
    for (method, path, status) in [
        ("GET", "/api/jobs/report/runs?limit=lots", 400),
        ("GET", "/api/jobs/report/runs?before=x", 400),
        ("GET", "/api/jobs/%FF/runs", 400),
        ("GET", "/api/jobs/report/pause", 405),
        ("POST", "/api/locks/report/unlock?force=maybe", 400),
        ("GET", "/api/nothing", 404),
        ("GET", "/api", 404),
        ("POST", "/api/jobs/report/explode", 404),
    ] {
        let reply = call(address, method, path, &[auth], "").await;
        assert_eq!(reply.status, status, "{method} {path}: {}", reply.body);
        json_error(&reply, path);
    }
    // Outside /api: pages.
    let missing = call(address, "GET", "/nothing", &[], "").await;
    assert_eq!(missing.status, 404);
    assert!(
        missing
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    let cookie = login(address, "", ALICE_SECRET).await;
    let wrong_type = call(
        address,
        "POST",
        "/jobs/report/pause",
        &[("Cookie", &cookie), ("Content-Type", "application/json")],
        "{}",
    )
    .await;
    assert_eq!(wrong_type.status, 415, "{}", wrong_type.body);
    assert!(
        wrong_type
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_name_is_400_before_the_database() {
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    let alice = bearer(ALICE_SECRET);
    let auth = ("Authorization", alice.as_str());
    let page_nul = call(address, "GET", "/jobs/a%00b", &[], "").await;
    assert_eq!(page_nul.status, 400, "{}", page_nul.body);
    let long_lock = format!("/api/locks/{}/unlock?force=true", "x".repeat(65));
    for (method, path) in [
        ("GET", "/api/jobs/a%00b/runs".to_owned()),
        ("GET", "/api/jobs/a%1Bb/actions".to_owned()),
        ("POST", "/api/jobs/nl%0Abilling/pause".to_owned()),
        ("POST", "/api/jobs/%E2%80%AEbilling/resume".to_owned()),
        ("POST", long_lock.clone()),
        ("POST", "/api/locks/a%00b/unlock?force=true".to_owned()),
    ] {
        let reply = call(address, method, &path, &[auth], "").await;
        assert_eq!(reply.status, 400, "{method} {path}: {}", reply.body);
        assert!(json_error(&reply, &path).contains("name"), "{}", reply.body);
    }
    let confirm = call(address, "GET", "/locks/a%00b/unlock", &[], "").await;
    assert_eq!(confirm.status, 400, "{}", confirm.body);
}

#[tokio::test]
async fn actions_on_names_no_job_has_are_refused_and_names_are_quoted_in_the_log() {
    let (logs, guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    let store = served.provider.cluster().unwrap();
    let alice = bearer(ALICE_SECRET);
    let auth = ("Authorization", alice.as_str());
    for action in ["pause", "resume", "trigger"] {
        let path = format!("/api/jobs/nobody/{action}");
        let reply = call(address, "POST", &path, &[auth], "").await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
    }
    let log = json(address, "/api/jobs/nobody/actions").await;
    assert_eq!(log, serde_json::json!([]), "a refused action was recorded");
    // A pause whose job no instance registers any more can still be lifted.
    store.pause("retired", "lockctl:bob").await.expect("pause");
    let resumed = call(address, "POST", "/api/jobs/retired/resume", &[auth], "").await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert!(store.control().await.unwrap().is_empty());

    // A holder that writes a newline cannot forge a line: the name is a quoted field.
    let forged = "host-z\n2026-01-01T00:00:00Z  INFO lock_dashboard::audit: token=alice forged";
    let request = lock_core::testkit::request(
        &"forge".into(),
        forged,
        std::time::Duration::from_secs(600),
        None,
    );
    served.provider.acquire(&request).await.expect("acquire");
    let released = call(
        address,
        "POST",
        "/api/locks/forge/unlock?force=true",
        &[auth],
        "",
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.body);
    let paused = call(
        address,
        "POST",
        "/api/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E/pause",
        &[auth],
        "",
    )
    .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    drop(guard);
    let text = logs.text();
    assert!(
        !text.lines().any(|line| line.starts_with("2026-01-01")),
        "{text}"
    );
    assert!(text.contains(r#"held_by="host-z\n2026"#), "{text}");
    assert!(text.contains(r#"lock="forge""#), "{text}");
    assert!(text.contains(&format!("job={EVIL_JOB:?}")), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_way_back_is_checked_before_the_action_runs() {
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    let store = served.provider.cluster().unwrap();
    let cookie = login(address, "", OPERATOR_SECRET).await;
    let session = ("Cookie", cookie.as_str());
    let token = csrf(&page(address, "/", &[session]).await);
    for (action, back) in [
        ("pause", "%2Fa%0D%0ASet-Cookie%3A%20x%3D1"),
        ("resume", "%2F%09%2Fevil.example%2F"),
        ("pause", "%2F%2509%2Fevil.example%2F"),
        ("resume", "%2Fa%7F"),
        ("pause", "%2Fa%09b"),
        ("resume", "%2F%5Cevil.example"),
    ] {
        let path = format!("/jobs/report/{action}");
        let reply = call(
            address,
            "POST",
            &path,
            &[session, FORM],
            &format!("csrf={token}&back={back}"),
        )
        .await;
        assert_eq!(
            (reply.status, reply.header("location")),
            (303, Some("/")),
            "{back}: {}",
            reply.body
        );
        let paused = store
            .control()
            .await
            .unwrap()
            .iter()
            .any(|c| c.job == "report");
        assert_eq!(paused, action == "pause", "{back}: the action ran once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_named_dot_and_dot_dot_are_reachable_from_the_pages() {
    let Some(served) = serve(|p| Dashboard::new(p).tokens(tokens()).router()).await else {
        return;
    };
    let address = served.address;
    common::register_jobs(served.provider.as_ref(), &[".", ".."]).await;
    let cookie = login(address, "", OPERATOR_SECRET).await;
    let session = ("Cookie", cookie.as_str());
    let jobs = page(address, "/?refresh=0", &[session]).await;
    // A browser removes `.` and `..` path segments, even as %2E: their pages are by query.
    for (name, link, title) in [
        (".", "/job?name=%2E", "Job .<"),
        ("..", "/job?name=%2E%2E", "Job ..<"),
    ] {
        assert!(
            jobs.contains(&format!(r#"href="{link}""#)),
            "{link}: {jobs}"
        );
        let job = page(address, link, &[session]).await;
        assert!(job.contains(title), "{link}: {job}");
        // As a path, for clients that keep it (curl, the JSON API).
        let by_path = format!("/jobs/{}", "%2E".repeat(name.len()));
        assert!(
            page(address, &by_path, &[]).await.contains(title),
            "{by_path}"
        );
        let runs = json(
            address,
            &format!("/api/jobs/{}/runs", "%2E".repeat(name.len())),
        )
        .await;
        assert_eq!(runs["job"], name);
        // Its buttons post by query too, and come back to it.
        let action = format!("/job/pause?name={}", "%2E".repeat(name.len()));
        assert!(
            job.contains(&format!(r#"action="{}""#, action.replace('&', "&amp;"))),
            "{job}"
        );
        let token = csrf(&job);
        // As the browser sends the form's hidden `back` (this page's path and query).
        let back = link
            .replace('%', "%25")
            .replace('?', "%3F")
            .replace('=', "%3D");
        let done = call(
            address,
            "POST",
            &action,
            &[session, FORM],
            &format!("csrf={token}&back={back}"),
        )
        .await;
        assert_eq!(
            (done.status, done.header("location")),
            (303, Some(link)),
            "{}",
            done.body
        );
    }
    let control = served.provider.cluster().unwrap().control().await.unwrap();
    let mut paused: Vec<&str> = control.iter().map(|c| c.job.as_str()).collect();
    paused.sort();
    assert_eq!(paused, [".", ".."]);

    // A lock named `..`: its release is by query as well.
    let request = lock_core::testkit::request(
        &"..".into(),
        common::INSTANCE,
        std::time::Duration::from_secs(600),
        None,
    );
    served.provider.acquire(&request).await.expect("acquire ..");
    let admin = login(address, "", ALICE_SECRET).await;
    let admin = ("Cookie", admin.as_str());
    let link = "/lock/unlock?name=%2E%2E";
    let locks = page(address, "/locks", &[admin]).await;
    assert!(locks.contains(&format!(r#"href="{link}""#)), "{locks}");
    let confirm = page(address, link, &[admin]).await;
    assert!(confirm.contains("Release lock ..?"), "{confirm}");
    assert!(
        confirm.contains(&format!(r#"action="{link}""#)),
        "{confirm}"
    );
    let token = csrf(&confirm);
    let released = call(
        address,
        "POST",
        link,
        &[admin, FORM],
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.body);
    assert!(!served.provider.read_lock("..").await.unwrap().unwrap().held);
}
