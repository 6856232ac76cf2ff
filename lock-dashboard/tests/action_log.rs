//! The action log over HTTP, against the real PostgreSQL: every action (pause, resume, trigger,
//! unlock; by the JSON API and by the forms) is recorded with `dashboard:<token name>` and shown
//! newest first on the Job page and by `GET /api/jobs/{name}/actions`; an unlock goes to the
//! page of the job whose lock it is; the texts are escaped; an action whose log row cannot be
//! written stands and says so.

mod common;

use lock_cluster::ClusterProvider;
use std::time::Duration;

use common::{ALICE_SECRET, INSTANCE, call, csrf, json, login, page, serve};
use lock_cluster::{Action, ActionRecord};
use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_dashboard::{Dashboard, Token};

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

fn alice() -> Token {
    Token::new("alice", ALICE_SECRET).expect("token")
}

/// `(action, by, detail)` of each row of a `GET /api/jobs/{name}/actions` answer.
fn rows(log: &serde_json::Value) -> Vec<(String, String, Option<String>)> {
    log.as_array()
        .expect("an array")
        .iter()
        .map(|row| {
            (
                row["action"].as_str().expect("action").to_owned(),
                row["by"].as_str().expect("by").to_owned(),
                row["detail"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_action_is_recorded_with_its_token_and_shown_newest_first() {
    let Some(served) = serve(|p| Dashboard::new(p).token(alice()).router()).await else {
        return;
    };
    let address = served.address;
    let bearer = format!("Bearer {ALICE_SECRET}");
    let auth = ("Authorization", bearer.as_str());

    for (path, status) in [
        ("/api/jobs/report/pause", 200),
        ("/api/jobs/report/pause", 200),
        ("/api/jobs/report/resume", 200),
        ("/api/jobs/report/trigger", 202),
        ("/api/locks/report/unlock?force=true", 200),
    ] {
        let reply = call(address, "POST", path, &[auth], "").await;
        assert_eq!(reply.status, status, "{path}: {}", reply.body);
        let answer: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(answer["recorded"], true, "{path}: {answer}");
        assert!(answer.get("warning").is_none(), "{answer}");
    }

    let log = json(address, "/api/jobs/report/actions").await;
    let seen = rows(&log);
    let alice = "dashboard:alice".to_owned();
    let request = log[1]["detail"].as_str().unwrap().to_owned();
    assert!(request.starts_with("request "), "{log}");
    assert_eq!(
        seen.iter()
            .map(|(action, by, _)| (action.as_str(), by))
            .collect::<Vec<_>>(),
        [
            ("unlock", &alice),
            ("trigger", &alice),
            ("resume", &alice),
            ("pause", &alice),
            ("pause", &alice),
        ],
        "newest first, each with who asked: {log}"
    );
    let unlock = seen[0].2.as_deref().unwrap();
    assert!(
        unlock.starts_with(&format!(
            "released lock report: it was held by {INSTANCE} until "
        )),
        "the lock row as it was: {unlock}"
    );
    assert_eq!(seen[4].2, None, "the first pause changed something");
    assert_eq!(
        seen[3].2.as_deref(),
        Some("was paused already; nothing changed")
    );
    assert_eq!(seen[2].2, None, "the resume changed something");
    let ids: Vec<i64> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    assert!(log[0]["at"].as_str().unwrap().ends_with('Z'), "{log}");
    let two = json(address, "/api/jobs/report/actions?limit=2").await;
    assert_eq!(two.as_array().unwrap().len(), 2);

    // The Job page: the same rows, newest first, who and when (a browser-zone time element).
    let job = page(address, "/jobs/report", &[]).await;
    let section = &job[job.find(r#"id="actions""#).expect("an Actions table")..];
    let section = &section[..section.find("</table>").unwrap()];
    let shown: Vec<i64> = section
        .split("data-action=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(shown, ids, "the page lists the log newest first");
    assert_eq!(section.matches("dashboard:alice").count(), 5, "{section}");
    assert!(section.contains(r#"<time datetime=""#), "{section}");
    assert!(section.contains(&request), "{section}");
    assert!(section.contains("was paused already; nothing changed"));

    // An unlock of a lock no job runs under is kept under the lock's name, and has a page.
    let request = testkit::request(&"orphan".into(), INSTANCE, Duration::from_secs(600), None);
    let AcquireOutcome::Acquired(_) = served.provider.acquire(&request).await.unwrap() else {
        panic!("a fresh lock refused");
    };
    let released = call(
        address,
        "POST",
        "/api/locks/orphan/unlock?force=true",
        &[auth],
        "",
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.body);
    let orphan = json(address, "/api/jobs/orphan/actions").await;
    assert_eq!(rows(&orphan)[0].0, "unlock", "{orphan}");
    assert!(
        page(address, "/jobs/orphan", &[])
            .await
            .contains("dashboard:alice")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_actions_are_recorded_and_texts_are_escaped() {
    let Some(served) = serve(|p| Dashboard::new(p).token(alice()).router()).await else {
        return;
    };
    let address = served.address;
    let cookie = login(address, "", ALICE_SECRET).await;
    let session = ("Cookie", cookie.as_str());
    let token = csrf(&page(address, "/", &[session]).await);
    let form = format!("csrf={token}&back=%2Fjobs%2Fbilling");
    let paused = call(
        address,
        "POST",
        "/jobs/billing/pause",
        &[session, FORM],
        &form,
    )
    .await;
    assert_eq!(paused.status, 303, "{}", paused.body);
    let unlock = format!("csrf={token}");
    let released = call(
        address,
        "POST",
        "/locks/report/unlock",
        &[session, FORM],
        &unlock,
    )
    .await;
    assert_eq!(released.status, 200, "{}", released.body);
    assert_eq!(
        rows(&json(address, "/api/jobs/billing/actions").await),
        [("pause".into(), "dashboard:alice".into(), None)]
    );
    assert_eq!(
        rows(&json(address, "/api/jobs/report/actions").await)[0].0,
        "unlock"
    );

    // Whoever wrote it (lockctl as a user of any name), the log is text on the page.
    let store = served.provider.cluster().unwrap();
    let evil = ActionRecord::new(
        "billing",
        Action::Resume,
        "lockctl:<script>alert(2)</script>",
    )
    .with_detail(Some("<img src=x onerror=alert(3)>"));
    store.record_action(&evil).await.unwrap();
    let job = page(address, "/jobs/billing", &[]).await;
    assert!(
        job.contains("lockctl:&lt;script&gt;alert(2)&lt;/script&gt;"),
        "{job}"
    );
    assert!(job.contains("&lt;img src=x onerror=alert(3)&gt;"), "{job}");
    assert!(!job.contains("<script>alert(2)") && !job.contains("<img src=x"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_the_log_cannot_record_still_stands_and_says_so() {
    let Some(served) = serve(|p| Dashboard::new(p).token(alice()).router()).await else {
        return;
    };
    let address = served.address;
    // A deployment whose action log ensure_schema() has not created yet.
    test_support::table::postgres_cleanup(format!("DROP TABLE {}_actions", served.table)).run_now();
    let bearer = format!("Bearer {ALICE_SECRET}");
    let paused = call(
        address,
        "POST",
        "/api/jobs/report/pause",
        &[("Authorization", bearer.as_str())],
        "",
    )
    .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    let answer: serde_json::Value = serde_json::from_str(&paused.body).unwrap();
    assert_eq!(
        (&answer["changed"], &answer["recorded"]),
        (&true.into(), &false.into())
    );
    let warning = answer["warning"].as_str().expect("a warning");
    assert!(warning.contains("not recorded"), "{warning}");
    let store = served.provider.cluster().unwrap();
    assert_eq!(store.control().await.unwrap().len(), 1, "the pause stands");

    // The form's answer says it too, instead of the redirect.
    let cookie = login(address, "", ALICE_SECRET).await;
    let session = ("Cookie", cookie.as_str());
    let token = csrf(&page(address, "/", &[session]).await);
    let form = format!("csrf={token}&back=%2F");
    let resumed = call(
        address,
        "POST",
        "/jobs/report/resume",
        &[session, FORM],
        &form,
    )
    .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert!(resumed.body.contains("not recorded"), "{}", resumed.body);
    assert!(
        store.control().await.unwrap().is_empty(),
        "the resume stands"
    );
    // The Job page still shows the job, and why there is no log.
    let job = page(address, "/jobs/report", &[]).await;
    assert!(job.contains("The action log cannot be read"), "{job}");
}
