//! The dashboard over HTTP, served on a free port against the real PostgreSQL: every page and
//! JSON endpoint, the token rules (read-only without one, 403 on an action without it,
//! cross-site requests refused, CSRF), escaping, and mounting under a path.

mod common;

use lock_cluster::ClusterProvider;
use std::sync::Arc;

use common::{ALICE_SECRET, EVIL_JOB, INSTANCE, call, csrf, json, login, page, serve};
use lock_cluster::ControlKind;
use lock_core::LockProvider;
use lock_dashboard::{Dashboard, Token};

fn alice() -> Token {
    Token::new("alice", ALICE_SECRET).expect("token")
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_the_cluster() {
    let Some(served) = serve(lock_dashboard::router).await else {
        return;
    };
    let address = served.address;

    let jobs = call(address, "GET", "/", &[], "").await;
    assert_eq!(jobs.status, 200, "{}", jobs.body);
    assert!(
        jobs.header("content-type")
            .unwrap()
            .starts_with("text/html"),
        "{:?}",
        jobs.headers
    );
    let policy = jobs.header("content-security-policy").expect("a CSP");
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert_eq!(jobs.header("x-frame-options"), Some("DENY"));
    let body = jobs.body;
    // The failing job first; the others by name.
    let billing = body.find(r#"data-job="billing""#).expect("billing listed");
    let report = body.find(r#"data-job="report""#).expect("report listed");
    assert!(billing < report, "failing billing is not first");
    assert!(body.contains("failing"), "{body}");
    // Trigger, instance of the last run, the held lease, the refresh interval, UTC times
    // with a machine-readable instant for the browser's zone.
    assert!(body.contains("fixed rate 1h"));
    assert!(body.contains(&format!("on {INSTANCE}")));
    assert!(body.contains("held</span> by host-a:4242:cafe"), "{body}");
    assert!(body.contains(r#"data-refresh="5""#));
    assert!(body.contains(r#"<time datetime=""#) && body.contains(" UTC</time>"));
    assert!(body.contains("/assets/dashboard.js"));
    // Read-only: no action button, no login (no token configured).
    assert!(!body.contains("<button"), "{body}");
    assert!(body.contains("read-only (no token configured)"));

    let job = page(address, "/jobs/billing", &[]).await;
    assert!(job.contains("Job billing"));
    assert!(job.contains(r#"class="badge failed""#), "{job}");
    assert!(job.contains("&lt;b&gt;boom&lt;/b&gt; &amp; more"), "{job}");
    assert!(job.contains("<svg"), "the charts are inline SVG");
    assert!(job.contains("No row in the lock table yet"), "{job}");
    let report = page(address, "/jobs/report", &[]).await;
    assert!(report.contains(r#"id="lock""#) && report.contains("host-a:4242:cafe"));
    assert_eq!(report.matches("data-run=").count(), 2);

    let instances = page(address, "/instances", &[]).await;
    assert!(instances.contains(&format!(r#"data-instance="{INSTANCE}""#)));
    assert!(instances.contains("alive") && instances.contains("12 ms"));
    let locks = page(address, "/locks", &[]).await;
    assert!(locks.contains(r#"data-lock="report""#) && locks.contains("held"));
    let script = call(address, "GET", "/assets/dashboard.js", &[], "").await;
    assert_eq!(script.status, 200);
    assert!(script.body.contains("setInterval"));
    let style = call(address, "GET", "/assets/dashboard.css", &[], "").await;
    assert_eq!(style.status, 200);

    let missing = call(address, "GET", "/jobs/nobody", &[], "").await;
    assert_eq!(missing.status, 404, "{}", missing.body);
    // `?refresh=0` turns the refresh off for one page.
    assert!(
        page(address, "/?refresh=0", &[])
            .await
            .contains(r#"data-refresh="0""#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_error_texts_are_escaped() {
    let Some(served) = serve(lock_dashboard::router).await else {
        return;
    };
    let address = served.address;
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    let jobs = page(address, "/", &[]).await;
    assert!(jobs.contains(escaped), "{jobs}");
    assert!(
        !jobs.contains(EVIL_JOB),
        "the job name reached the page as HTML"
    );
    // Its link is percent-encoded, and its page escapes it too.
    let path = "/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E";
    assert!(jobs.contains(path), "{jobs}");
    let job = page(address, path, &[]).await;
    assert!(job.contains(&format!("Job {escaped}")), "{job}");
    assert!(!job.contains(EVIL_JOB));
    let instances = page(address, "/instances", &[]).await;
    assert!(instances.contains(escaped) && !instances.contains(EVIL_JOB));
    // In JSON it is a plain string.
    let api = json(address, "/api/jobs").await;
    assert!(
        api.as_array()
            .unwrap()
            .iter()
            .any(|j| j["name"] == EVIL_JOB)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_endpoints_serve_the_same_data() {
    let Some(served) = serve(|p| Dashboard::new(p).page_size(1).router()).await else {
        return;
    };
    let address = served.address;
    let jobs = json(address, "/api/jobs").await;
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    assert_eq!(jobs[0]["name"], "billing", "failing first");
    assert_eq!(jobs[0]["failing"], true);
    assert_eq!(jobs[0]["last_run"]["error"], "<b>boom</b> & more");
    let report = jobs.iter().find(|j| j["name"] == "report").unwrap();
    assert_eq!(report["running"]["holder"], INSTANCE);
    assert_eq!(report["live_instances"][0], INSTANCE);
    assert_eq!(report["paused"], false);

    // One run a page (page_size 1): the newest, then the older one, then none.
    let first = json(address, "/api/jobs/report/runs").await;
    assert_eq!(first["runs"].as_array().unwrap().len(), 1);
    let older = first["older"].as_i64().expect("an older page");
    assert_eq!(first["runs"][0]["id"].as_i64().unwrap(), older);
    let second = json(address, &format!("/api/jobs/report/runs?before={older}")).await;
    assert_eq!(second["runs"].as_array().unwrap().len(), 1);
    assert!(second["runs"][0]["id"].as_i64().unwrap() < older);
    assert!(second["older"].is_null(), "{second}");
    let both = json(address, "/api/jobs/report/runs?limit=10").await;
    assert_eq!(both["runs"].as_array().unwrap().len(), 2);
    assert_eq!(both["runs"][0]["outcome"], "succeeded");
    assert!(both["runs"][0]["duration_ms"].as_i64().unwrap() >= 0);
    assert!(both["runs"][0]["lag_ms"].as_i64().is_some());
    // The HTML page links the older page the same way.
    let html = page(address, "/jobs/report", &[]).await;
    assert!(
        html.contains(&format!("/jobs/report?before={older}")),
        "{html}"
    );

    let instances = json(address, "/api/instances").await;
    assert_eq!(instances[0]["instance_id"], INSTANCE);
    assert_eq!(instances[0]["alive"], true);
    assert_eq!(instances[0]["clock_offset_ms"], 12);
    let locks = json(address, "/api/locks").await;
    assert_eq!(locks[0]["name"], "report");
    assert_eq!(locks[0]["held"], true);
    assert_eq!(locks[0]["locked_by"], INSTANCE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_dashboard_is_read_only() {
    let Some(served) = serve(lock_dashboard::router).await else {
        return;
    };
    let address = served.address;
    for path in [
        "/api/jobs/report/pause",
        "/api/jobs/report/trigger",
        "/api/locks/report/unlock?force=true",
    ] {
        let reply = call(
            address,
            "POST",
            path,
            &[("Authorization", "Bearer anything-at-all-here")],
            "",
        )
        .await;
        assert_eq!(reply.status, 403, "{path}: {}", reply.body);
        assert!(reply.body.contains("read-only"), "{}", reply.body);
    }
    let login = call(
        address,
        "POST",
        "/login",
        &[FORM],
        "token=anything-at-all-here",
    )
    .await;
    assert_eq!(login.status, 403);
    let store = served.provider.cluster().unwrap();
    assert!(
        store.control().await.unwrap().is_empty(),
        "nothing was paused"
    );
    assert!(
        served.provider.list_locks().await.unwrap()[0].held,
        "nothing was released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_actions_need_the_bearer_token_and_record_its_name() {
    let Some(served) = serve(|p| Dashboard::new(p).token(alice()).router()).await else {
        return;
    };
    let address = served.address;
    let store = served.provider.cluster().unwrap();
    let pause = "/api/jobs/report/pause";
    let none = call(address, "POST", pause, &[], "").await;
    assert_eq!(none.status, 403, "{}", none.body);
    let wrong = call(
        address,
        "POST",
        pause,
        &[("Authorization", "Bearer not-alices-secret-at-all")],
        "",
    )
    .await;
    assert_eq!(wrong.status, 403, "{}", wrong.body);
    assert!(store.control().await.unwrap().is_empty());

    let bearer = format!("Bearer {ALICE_SECRET}");
    let auth = ("Authorization", bearer.as_str());
    // A browser's cross-site request is refused even with the token.
    let cross = call(
        address,
        "POST",
        pause,
        &[auth, ("Sec-Fetch-Site", "cross-site")],
        "",
    )
    .await;
    assert_eq!(cross.status, 403, "{}", cross.body);
    let foreign = call(
        address,
        "POST",
        pause,
        &[auth, ("Origin", "http://evil.example")],
        "",
    )
    .await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert!(store.control().await.unwrap().is_empty());

    let paused = call(address, "POST", pause, &[auth], "").await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    let answer: serde_json::Value = serde_json::from_str(&paused.body).unwrap();
    assert_eq!(
        (answer["changed"].clone(), answer["by"].clone()),
        (true.into(), "dashboard:alice".into())
    );
    let control = store.control().await.unwrap();
    assert_eq!(control.len(), 1);
    assert_eq!(
        (control[0].kind, control[0].requested_by.as_str()),
        (ControlKind::Pause, "dashboard:alice")
    );
    // Shown with who asked on the job's page.
    let job = page(address, "/jobs/report", &[]).await;
    assert!(job.contains("paused</span> by dashboard:alice"), "{job}");

    let resumed = call(address, "POST", "/api/jobs/report/resume", &[auth], "").await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert!(store.control().await.unwrap().is_empty());
    let triggered = call(address, "POST", "/api/jobs/report/trigger", &[auth], "").await;
    assert_eq!(triggered.status, 202, "{}", triggered.body);
    let control = store.control().await.unwrap();
    assert_eq!(
        (control[0].kind, control[0].requested_by.as_str()),
        (ControlKind::Trigger, "dashboard:alice")
    );
    // A trigger's parameters: kept with the request (and, once run, in its history row).
    let trigger = "/api/jobs/report/trigger";
    let with_params = r#"{"params": {"day": "2026-12-01", "note": "a b&c"}}"#;
    let triggered = call(address, "POST", trigger, &[auth], with_params).await;
    assert_eq!(triggered.status, 202, "{}", triggered.body);
    let control = store.control().await.unwrap();
    let request = control.last().unwrap();
    assert_eq!(request.params.get("day"), Some("2026-12-01"), "{request:?}");
    assert_eq!(request.params.get("note"), Some("a b&c"), "{request:?}");
    for (body, says) in [
        (r#"{"params": {"bad key": "x"}}"#, "bad key"),
        (r#"{"params": {"note": "\u001b[2J"}}"#, "control"),
        (r#"{"parameters": {}}"#, "params"),
        ("not json", "params"),
    ] {
        let refused = call(address, "POST", trigger, &[auth], body).await;
        assert_eq!(refused.status, 400, "{body}: {}", refused.body);
        assert!(refused.body.contains(says), "{body}: {}", refused.body);
    }
    let pause_with = call(
        address,
        "POST",
        "/api/jobs/report/pause",
        &[auth],
        with_params,
    )
    .await;
    assert_eq!(pause_with.status, 400, "{}", pause_with.body);
    assert_eq!(
        store.control().await.unwrap().len(),
        control.len(),
        "nothing refused was written"
    );
    let unknown = call(address, "POST", "/api/jobs/nobody/pause", &[auth], "").await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    // Unlock: without force, lockctl's warning and nothing released; with it, released.
    let unlock = "/api/locks/report/unlock";
    let refused = call(address, "POST", unlock, &[auth], "").await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    let warning = lock_dashboard::unlock_warning(
        &served.provider.read_lock("report").await.unwrap().unwrap(),
    );
    let refusal: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
    assert!(
        refusal["error"].as_str().unwrap().ends_with(&warning),
        "{refusal}"
    );
    assert!(warning.contains("releasing the lock lets another instance start the same job"));
    assert!(
        served
            .provider
            .read_lock("report")
            .await
            .unwrap()
            .unwrap()
            .held
    );
    let released = call(
        address,
        "POST",
        &format!("{unlock}?force=true"),
        &[auth],
        "",
    )
    .await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_actions_need_a_session_and_its_csrf_token() {
    let Some(served) = serve(|p| Dashboard::new(p).token(alice()).router()).await else {
        return;
    };
    let address = served.address;
    let store = served.provider.cluster().unwrap();

    // Signed out: no buttons, a login link.
    let signed_out = page(address, "/", &[]).await;
    assert!(
        !signed_out.contains("<button") && signed_out.contains("log in"),
        "{signed_out}"
    );
    let wrong = call(
        address,
        "POST",
        "/login",
        &[FORM],
        "token=not-alices-secret-at-all",
    )
    .await;
    assert_eq!(wrong.status, 403);
    assert!(wrong.header("set-cookie").is_none());
    let cross_login = call(
        address,
        "POST",
        "/login",
        &[FORM, ("Sec-Fetch-Site", "cross-site")],
        &format!("token={ALICE_SECRET}"),
    )
    .await;
    assert_eq!(cross_login.status, 403, "login CSRF refused");

    let reply = call(
        address,
        "POST",
        "/login",
        &[FORM],
        &format!("token={ALICE_SECRET}"),
    )
    .await;
    assert_eq!(reply.status, 303);
    let set_cookie = reply.header("set-cookie").unwrap();
    assert!(
        set_cookie.contains("HttpOnly")
            && set_cookie.contains("SameSite=Strict")
            && set_cookie.contains("Path=/"),
        "{set_cookie}"
    );
    let cookie = login(address, "", ALICE_SECRET).await;
    let session = ("Cookie", cookie.as_str());
    let signed_in = page(address, "/", &[session]).await;
    assert!(
        signed_in.contains("signed in as <strong>alice</strong>"),
        "{signed_in}"
    );
    assert!(signed_in.contains(r#"class="pause""#), "{signed_in}");
    let token = csrf(&signed_in);

    let pause = "/jobs/report/pause";
    let without_csrf = call(address, "POST", pause, &[session, FORM], "back=%2F").await;
    assert_eq!(
        without_csrf.status, 422,
        "a form without the csrf field is not even parsed"
    );
    let bad_csrf = call(
        address,
        "POST",
        pause,
        &[session, FORM],
        "csrf=0000&back=%2F",
    )
    .await;
    assert_eq!(bad_csrf.status, 403, "{}", bad_csrf.body);
    let form = format!("csrf={token}&back=%2F");
    let no_session = call(address, "POST", pause, &[FORM], &form).await;
    assert_eq!(no_session.status, 403, "{}", no_session.body);
    let cross = call(
        address,
        "POST",
        pause,
        &[session, FORM, ("Sec-Fetch-Site", "cross-site")],
        &form,
    )
    .await;
    assert_eq!(cross.status, 403, "{}", cross.body);
    let foreign = call(
        address,
        "POST",
        pause,
        &[session, FORM, ("Origin", "http://evil.example")],
        &form,
    )
    .await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert!(
        store.control().await.unwrap().is_empty(),
        "a refused form paused the job"
    );

    let origin = format!("http://{address}");
    let done = call(
        address,
        "POST",
        pause,
        &[
            session,
            FORM,
            ("Origin", origin.as_str()),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        &form,
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.header("location"), Some("/"));
    let control = store.control().await.unwrap();
    assert_eq!(control[0].requested_by, "dashboard:alice");
    // The job page's trigger form has a parameters field, one `key=value` per line.
    let job_page = page(address, "/jobs/report", &[session]).await;
    assert!(job_page.contains(r#"name="params""#), "{job_page}");
    let same_origin = [
        session,
        FORM,
        ("Origin", origin.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let trigger = "/jobs/report/trigger";
    let params = "day%3D2026-12-02%0D%0A%0D%0Aregion%3Deu%20west";
    let form_with = format!("csrf={token}&back=%2F&params={params}");
    let triggered = call(address, "POST", trigger, &same_origin, &form_with).await;
    assert_eq!(triggered.status, 303, "{}", triggered.body);
    let control = store.control().await.unwrap();
    let request = control
        .iter()
        .find(|c| c.kind == ControlKind::Trigger)
        .expect("the trigger request");
    assert_eq!(request.params.encode(), "day=2026-12-02&region=eu+west");
    let bad = format!("csrf={token}&back=%2F&params=bad%20key%3D1");
    let refused = call(address, "POST", trigger, &same_origin, &bad).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("bad key"), "{}", refused.body);
    let after = page(address, "/", &[session]).await;
    let row = &after[after.find(r#"data-job="report""#).unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("badge paused") && row.contains(r#"class="resume""#),
        "{row}"
    );
    // A way back that leaves the dashboard is not followed.
    let away = call(
        address,
        "POST",
        "/jobs/report/resume",
        &[session, FORM],
        &format!("csrf={token}&back=%2F%2Fevil.example"),
    )
    .await;
    assert_eq!(away.header("location"), Some("/"));

    // Unlock from the browser: the confirmation shows lockctl's warning, then releases.
    let confirm = page(address, "/locks/report/unlock", &[session]).await;
    assert!(
        confirm.contains("releasing the lock lets another instance start the same job"),
        "{confirm}"
    );
    let released = call(
        address,
        "POST",
        "/locks/report/unlock",
        &[session, FORM],
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.body);
    assert!(released.body.contains("Released lock report"));
    assert!(
        !served
            .provider
            .read_lock("report")
            .await
            .unwrap()
            .unwrap()
            .held
    );

    // Logged out, the session is gone.
    let out = call(
        address,
        "POST",
        "/logout",
        &[session, FORM],
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(out.status, 303);
    assert!(
        !page(address, "/", &[session])
            .await
            .contains("signed in as")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounted_under_a_path_every_link_stays_under_it() {
    let Some(served) = serve(|p| {
        axum::Router::new().nest(
            "/scheduler",
            Dashboard::new(Arc::clone(&p)).token(alice()).router(),
        )
    })
    .await
    else {
        return;
    };
    let address = served.address;
    let jobs = page(address, "/scheduler", &[]).await;
    assert!(jobs.contains(r#"href="/scheduler/instances""#), "{jobs}");
    assert!(jobs.contains(r#"href="/scheduler/jobs/report""#));
    assert!(jobs.contains(r#"src="/scheduler/assets/dashboard.js""#));
    assert!(
        page(address, "/scheduler/jobs/report", &[])
            .await
            .contains("Job report")
    );
    assert!(json(address, "/scheduler/api/locks").await.is_array());
    let reply = call(
        address,
        "POST",
        "/scheduler/login",
        &[FORM],
        &format!("token={ALICE_SECRET}"),
    )
    .await;
    assert_eq!(reply.header("location"), Some("/scheduler"));
    assert!(
        reply
            .header("set-cookie")
            .unwrap()
            .contains("Path=/scheduler;")
    );
    let cookie = login(address, "/scheduler", ALICE_SECRET).await;
    let signed_in = page(address, "/scheduler", &[("Cookie", cookie.as_str())]).await;
    assert!(
        signed_in.contains(r#"action="/scheduler/jobs/report/pause""#),
        "{signed_in}"
    );
    // After an action, back to the page the button was on, under the mount point.
    let session = ("Cookie", cookie.as_str());
    let token = csrf(&page(address, "/scheduler?refresh=0", &[session]).await);
    let done = call(
        address,
        "POST",
        "/scheduler/jobs/report/pause",
        &[session, FORM],
        &format!("csrf={token}&back=%2F%3Frefresh%3D0"),
    )
    .await;
    assert_eq!(
        (done.status, done.header("location")),
        (303, Some("/scheduler?refresh=0")),
        "{}",
        done.body
    );
    let done = call(
        address,
        "POST",
        "/scheduler/jobs/report/resume",
        &[session, FORM],
        &format!("csrf={token}&back=%2Fjobs%2Freport"),
    )
    .await;
    assert_eq!(done.header("location"), Some("/scheduler/jobs/report"));
    assert_eq!(
        call(address, "GET", "/instances", &[], "").await.status,
        404
    );
}

/// A fire that failed once and succeeded on its retry: two rows of one slot and fence, the
/// JSON says each one's attempt (and that cancellation was asked of the second), and the Job
/// page shows the retry as an attempt of its slot, grouped under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_fire_shows_its_attempts_in_the_json_and_the_job_page() {
    use lock_cluster::{RunEnd, RunStart, RunState};
    use lock_core::FireKind;
    let Some(served) = serve(lock_dashboard::router).await else {
        return;
    };
    let store = served.provider.cluster().expect("operations tables");
    let slot = served.provider.database_time().await.expect("time");
    for (attempt, outcome) in [(1, RunState::Failed), (2, RunState::Succeeded)] {
        let id = store
            .run_started(&RunStart {
                job: "billing".into(),
                slot: Some(slot),
                fire_kind: FireKind::Scheduled,
                instance_id: INSTANCE.into(),
                fence: 9,
                attempt,
                params: Default::default(),
            })
            .await
            .expect("start");
        let end = RunEnd::new(id, outcome, (attempt == 1).then_some("feed not ready"))
            .with_cancel_requested(attempt == 2);
        store.run_ended(&end).await.expect("end");
    }
    let runs = json(served.address, "/api/jobs/billing/runs?limit=10").await;
    let runs = runs["runs"].as_array().expect("runs");
    let attempts: Vec<_> = runs
        .iter()
        .map(|r| {
            (
                r["attempt"].as_u64().expect("attempt"),
                r["outcome"].as_str().unwrap().to_owned(),
                r["cancel_requested"].as_bool().expect("cancel_requested"),
            )
        })
        .collect();
    assert_eq!(
        attempts[..2],
        [
            (2, "succeeded".to_owned(), true),
            (1, "failed".to_owned(), false)
        ],
        "{runs:?}"
    );
    let html = page(served.address, "/jobs/billing", &[]).await;
    assert!(html.contains(r#"data-attempt="2" class="retry""#), "{html}");
    assert!(html.contains("↳ attempt 2 of "), "{html}");
    assert!(html.contains("cancel requested"), "{html}");
}

/// The Run page: a run's facts and its log lines, escaped, linked from the Job page; a run
/// the job does not have is 404, an id that is no number 400, and a job named `..` has its
/// runs at `/run?name=..&id=ID`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_page_shows_its_log_lines() {
    let Some(served) = serve(lock_dashboard::router).await else {
        return;
    };
    let address = served.address;
    let store = served.provider.cluster().expect("operations tables");
    let at = served.provider.database_time().await.expect("time");
    let mut ids = Vec::new();
    for job in ["billing", ".."] {
        let id = store
            .run_started(&lock_cluster::RunStart {
                job: job.into(),
                slot: None,
                fire_kind: lock_core::FireKind::Manual,
                instance_id: INSTANCE.into(),
                fence: 9,
                attempt: 1,
                params: Default::default(),
            })
            .await
            .expect("start");
        let mut lines = lock_cluster::RunLogWriter::new(1, 65536);
        lines.line(at, "WARN", "billing::charge", |m| {
            m.push_str("<b>card</b> declined & retried")
        });
        lines.line(at, "INFO", "billing", |m| m.push_str("not kept"));
        let end = lock_cluster::RunEnd::new(id, lock_cluster::RunState::Succeeded, None)
            .with_logs(lines.finish());
        store.run_ended(&end).await.expect("end");
        ids.push(id);
    }

    let job = page(address, "/jobs/billing", &[]).await;
    assert!(
        job.contains(&format!(r#"href="/jobs/billing/runs/{}""#, ids[0])),
        "the run links to its page: {job}"
    );
    let run = page(address, &format!("/jobs/billing/runs/{}", ids[0]), &[]).await;
    assert!(run.contains(&format!("Run {} of", ids[0])), "{run}");
    assert!(run.contains(r#"id="log""#), "{run}");
    assert!(
        run.contains("&lt;b&gt;card&lt;/b&gt; declined &amp; retried"),
        "escaped: {run}"
    );
    assert!(!run.contains("<b>card"), "{run}");
    assert!(!run.contains("not kept</td>"), "{run}");
    assert!(run.contains("1 more lines not kept"), "{run}");

    let missing = call(address, "GET", "/jobs/billing/runs/999999999", &[], "").await;
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert!(
        missing.body.contains("has no run 999999999"),
        "{}",
        missing.body
    );
    let wrong = call(
        address,
        "GET",
        &format!("/jobs/report/runs/{}", ids[0]),
        &[],
        "",
    )
    .await;
    assert_eq!(wrong.status, 404, "another job's run: {}", wrong.body);
    let bad = call(address, "GET", "/jobs/billing/runs/latest", &[], "").await;
    assert_eq!(bad.status, 400, "{}", bad.body);

    let dots = page(address, &format!("/run?name=%2E%2E&id={}", ids[1]), &[]).await;
    assert!(dots.contains("declined"), "{dots}");
}
