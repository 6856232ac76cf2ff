//! The dashboard in a real browser: headless Chromium driven through Debian's chromium-driver
//! (WebDriver), against a running two-instance cluster (two schedulers of this process, each
//! with its own connection pool, on one lock table in the real PostgreSQL). It logs in, clicks
//! Pause on a job, sees the job marked paused, and no run of it starts while it is; then the
//! page's auto-refresh shows a resume made through the JSON API. Another test loads the
//! dashboard through a name re-pointed at it (DNS rebinding: Chromium's
//! `--host-resolver-rules` maps `evil.example` to 127.0.0.1), which must show no data, and
//! signs in with a viewer token, which must show no button. A third runs jobs with known
//! outcomes and checks the charts of the Job page and the Jobs page, with no console error
//! (CSP violations included). Screenshots go to `target/tmp/` (`CARGO_TARGET_TMPDIR`).
//!
//! Without chromium or chromium-driver the test prints `SKIPPED` (and fails when `CI` is set:
//! `scripts/test` installs both).

mod common;

use lock_cluster::ClusterProvider;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::{ALICE_SECRET, call, provider, serve, serve_app};
use fantoccini::{Client, ClientBuilder, Locator};
use lock_cluster::ControlKind;
use lock_core::{JobContext, LockProvider};
use lock_dashboard::{Dashboard, Role, Token};
use lock_provider_postgres::PostgresLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::{eventually, free_port};

/// Long enough for a loaded 2-core machine to start a browser or see two heartbeats (1 s).
const WAIT: Duration = Duration::from_secs(30);

/// chromium-driver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

async fn start_driver() -> Option<Driver> {
    if !installed("chromedriver") || !installed("chromium") {
        test_support::skip::skip_unless_ci(
            "Debian's chromium and chromium-driver are not installed (scripts/test installs them)",
        );
        return None;
    }
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver { child, port };
    eventually(WAIT, "chromedriver to listen", || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    Some(driver)
}

async fn browser(driver: &Driver) -> Client {
    browser_with(driver, &[]).await
}

/// A browser started with `extra` command-line arguments.
async fn browser_with(driver: &Driver, extra: &[&str]) -> Client {
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,800",
    ];
    args.extend_from_slice(extra);
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        serde_json::json!({ "binary": "/usr/bin/chromium", "args": args }),
    );
    // The console (errors, CSP violations), read back by `console_errors`.
    capabilities.insert(
        "goog:loggingPrefs".to_owned(),
        serde_json::json!({ "browser": "ALL" }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session of headless chromium")
}

/// One instance of the service: `tick` every second, `nightly_report` once a year (so it
/// only runs when triggered), `flaky` failing every 2 s; run history kept.
/// Logs in on `base`'s login page with `secret`, and waits until the page shows who is
/// signed in (`strong` is in the header only then: the login has landed).
async fn log_in(client: &Client, base: &str, secret: &str) {
    client
        .goto(&format!("{base}/login"))
        .await
        .expect("login page");
    client
        .find(Locator::Css("input#token"))
        .await
        .expect("token field")
        .send_keys(secret)
        .await
        .expect("type the token");
    client
        .find(Locator::Css("form.login button"))
        .await
        .expect("login button")
        .click()
        .await
        .expect("log in");
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("span.who strong"))
        .await
        .expect("signed in");
}

async fn instance(provider: Arc<PostgresLockProvider>, id: &str) -> Scheduler {
    let tick = Job::new(
        "tick",
        Trigger::fixed_rate(Duration::from_secs(1)).expect("trigger"),
        |_ctx: JobContext| async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
        },
    );
    let report = Job::new(
        "nightly_report",
        Trigger::cron("0 0 3 * * *").expect("cron"),
        |_ctx: JobContext| async move {},
    );
    let flaky = Job::new(
        "flaky",
        Trigger::fixed_rate(Duration::from_secs(2)).expect("trigger"),
        |_ctx: JobContext| async move {
            Err::<(), _>(std::io::Error::other(
                "upstream answered 503 Service Unavailable",
            ))
        },
    );
    Scheduler::builder()
        .lock_provider(provider)
        .instance_id(id)
        .history(Duration::from_secs(3600))
        .jobs([tick, report, flaky])
        .start()
        .await
        .expect("scheduler")
}

/// A second provider (its own pool) on the same table: another instance's connection.
async fn another(table: &str) -> Arc<PostgresLockProvider> {
    let provider = PostgresLockProvider::connect(&test_support::db::postgres_url())
        .await
        .expect("connect")
        .with_table(table)
        .expect("table");
    Arc::new(provider)
}

fn save(name: &str, png: &[u8], for_readme: bool) {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, png).expect("save the screenshot");
    println!("screenshot: {}", path.display());
    // `LOCK_DASHBOARD_SCREENSHOT=../docs/dashboard.png` refreshes the README's picture (cargo
    // runs the test in `lock-dashboard/`).
    if let Some(target) = std::env::var_os("LOCK_DASHBOARD_SCREENSHOT").filter(|_| for_readme) {
        std::fs::write(target, png).expect("save the README's screenshot");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_a_job_in_the_browser_stops_its_runs() {
    let Some(driver) = start_driver().await else {
        return;
    };
    let Some((first, table, _cleanup)) = provider().await else {
        return;
    };
    let second = another(&table).await;
    let a = instance(Arc::clone(&first), "instance-a").await;
    let b = instance(Arc::clone(&second), "instance-b").await;
    let token = Token::new("alice", ALICE_SECRET).expect("token");
    let address: SocketAddr =
        serve_app(Dashboard::new(Arc::clone(&first)).token(token).router()).await;
    let base = format!("http://{address}");
    let store = first.cluster().expect("operations tables");

    // Both instances registered tick, and it has run.
    eventually(
        WAIT,
        "tick registered by two live instances, with a run",
        || {
            let first = Arc::clone(&first);
            async move {
                let view = lock_cluster::ClusterView::read(first.as_ref(), &Default::default())
                    .await
                    .ok()?;
                let tick = view.jobs.iter().find(|j| j.name == "tick")?;
                (tick.live_instances.len() == 2 && tick.last_run.is_some()).then_some(())
            }
        },
    )
    .await;

    let client = browser(&driver).await;
    log_in(&client, &base, ALICE_SECRET).await;

    // Without auto-refresh while clicking, so the button cannot be replaced under the click.
    client
        .goto(&format!("{base}/?refresh=0"))
        .await
        .expect("jobs page");
    client
        .find(Locator::Css(r#"tr[data-job="tick"] button.pause"#))
        .await
        .expect("a Pause button on tick's row")
        .click()
        .await
        .expect("click Pause");
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(r#"tr[data-job="tick"] .badge.paused"#))
        .await
        .expect("tick marked paused");
    let row = client
        .find(Locator::Css(r#"tr[data-job="tick"]"#))
        .await
        .expect("tick's row")
        .text()
        .await
        .expect("row text");
    assert!(row.contains("paused") && row.contains("Resume"), "{row}");
    save(
        "dashboard-jobs-paused.png",
        &client.screenshot().await.expect("screenshot"),
        true,
    );

    // The pause is alice's, and every instance honours it from its next heartbeat.
    let control = store.control().await.expect("control");
    let pause = control
        .iter()
        .find(|c| c.job == "tick" && c.kind == ControlKind::Pause)
        .expect("a pause row");
    assert_eq!(pause.requested_by, "dashboard:alice");
    let paused_at = pause.requested_at;
    let acknowledged: DateTime<Utc> =
        eventually(WAIT, "a heartbeat of each instance after the pause", || {
            let first = Arc::clone(&first);
            async move {
                let registry = first.cluster()?.registry().await.ok()?;
                let beats: Vec<DateTime<Utc>> = registry
                    .iter()
                    .filter(|row| row.job.is_none())
                    .map(|row| row.heartbeat_at)
                    .collect();
                (beats.len() == 2 && beats.iter().all(|at| *at > paused_at))
                    .then(|| beats.into_iter().max().expect("two"))
            }
        })
        .await;
    // Three more one-second slots pass. A fire that began within a slot of the acknowledging
    // heartbeat may have been under way before the pause was swapped in; none after that.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs = store.history("tick", 200).await.expect("history");
    let late: Vec<_> = runs
        .iter()
        .filter(|run| run.started_at > acknowledged + TimeDelta::seconds(1))
        .collect();
    assert!(late.is_empty(), "tick ran while paused: {late:?}");
    let lock = first
        .read_lock("tick")
        .await
        .expect("read")
        .expect("tick's lock");
    assert!(
        lock.last_fire
            .is_none_or(|last| last <= acknowledged + TimeDelta::seconds(1)),
        "tick's lock took a slot while paused: {lock:?}"
    );

    // Auto-refresh: a page left open shows a resume made elsewhere (through the API).
    client
        .goto(&format!("{base}/?refresh=1"))
        .await
        .expect("jobs page");
    client
        .find(Locator::Css(r#"tr[data-job="tick"] .badge.paused"#))
        .await
        .expect("still paused");
    let bearer = format!("Bearer {ALICE_SECRET}");
    let resumed = call(
        address,
        "POST",
        "/api/jobs/tick/resume",
        &[("Authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(r#"tr[data-job="tick"] button.pause"#))
        .await
        .expect("the refreshed page shows tick active again");
    // The browser's zone next to UTC, added by the page's script.
    client
        .find(Locator::Css("time + span.local"))
        .await
        .expect("times in the browser's zone");
    save(
        "dashboard-jobs.png",
        &client.screenshot().await.expect("screenshot"),
        false,
    );

    // A failing job's page: its error texts and charts.
    client
        .goto(&format!("{base}/jobs/flaky"))
        .await
        .expect("job page");
    let error = client
        .find(Locator::Css("#runs pre.error"))
        .await
        .expect("a failed run's error")
        .text()
        .await
        .expect("error text");
    assert!(error.contains("upstream answered 503"), "{error}");
    client
        .find(Locator::Css("figure.chart svg rect.bar.bad"))
        .await
        .expect("failed runs drawn in the duration chart");
    save(
        "dashboard-job.png",
        &client.screenshot().await.expect("screenshot"),
        false,
    );

    client.close().await.expect("close the browser");
    a.shutdown().await.expect("shutdown a");
    b.shutdown().await.expect("shutdown b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_name_shows_no_data_and_a_viewer_sees_no_button() {
    const VIEWER_SECRET: &str = "vera-secret-0123456789";
    let Some(driver) = start_driver().await else {
        return;
    };
    let Some(served) = serve(|p| {
        Dashboard::new(p)
            .token(Token::new("alice", ALICE_SECRET).expect("token"))
            .token(Token::with_role("vera", Role::Viewer, VIEWER_SECRET).expect("token"))
            .router()
    })
    .await
    else {
        return;
    };
    // Jobs a browser cannot name in a path (it removes `.` and `..` segments, even as %2E).
    common::register_jobs(served.provider.as_ref(), &[".", ".."]).await;
    let port = served.address.port();
    let client = browser_with(
        &driver,
        &["--host-resolver-rules=MAP evil.example 127.0.0.1"],
    )
    .await;

    // The attacker's page, on its own name now resolving to the dashboard: same origin for the
    // browser, so only the Host check stands between its script and the data.
    let evil = format!("http://evil.example:{port}");
    client
        .goto(&format!("{evil}/"))
        .await
        .expect("the rebound page");
    let shown = client.source().await.expect("page source");
    assert!(shown.contains("--allow-host evil.example"), "{shown}");
    for data in ["report", "billing", "host-a"] {
        assert!(
            !shown.contains(data),
            "the rebound page shows {data}: {shown}"
        );
    }
    let fetched = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/api/jobs').then(r => r.text().then(t => done([r.status, t])))
                               .catch(e => done([0, String(e)]));",
            vec![],
        )
        .await
        .expect("fetch from the rebound page");
    assert_eq!(fetched[0], 403, "{fetched}");
    assert!(
        !fetched[1].as_str().unwrap_or("").contains("report"),
        "{fetched}"
    );
    save(
        "dashboard-rebinding-refused.png",
        &client.screenshot().await.expect("screenshot"),
        false,
    );

    // A viewer signs in and reads, with no button of an action it may not take.
    let base = format!("http://127.0.0.1:{port}");
    log_in(&client, &base, VIEWER_SECRET).await;
    let who = client
        .find(Locator::Css("span.who"))
        .await
        .expect("who")
        .text()
        .await
        .expect("who");
    assert!(who.contains("vera") && who.contains("viewer"), "{who}");
    client
        .goto(&format!("{base}/?refresh=0"))
        .await
        .expect("jobs page");
    client
        .find(Locator::Css(r#"tr[data-job="report"]"#))
        .await
        .expect("the viewer reads the jobs");
    let buttons = client
        .find_all(Locator::Css("main button"))
        .await
        .expect("buttons");
    assert!(
        buttons.is_empty(),
        "a viewer sees {} action buttons",
        buttons.len()
    );
    for name in [".", ".."] {
        client
            .goto(&format!("{base}/?refresh=0"))
            .await
            .expect("jobs page");
        client
            .find(Locator::Css(&format!(r#"tr[data-job="{name}"] a"#)))
            .await
            .expect("the job's link")
            .click()
            .await
            .expect("follow it");
        // `dl.facts` is on a job's page only: the click has landed.
        client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("dl.facts"))
            .await
            .unwrap_or_else(|e| panic!("job {name:?}'s page: {e}"));
        let title = client
            .find(Locator::Css("main h1"))
            .await
            .expect("a title")
            .text()
            .await
            .expect("its text");
        assert_eq!(title, format!("Job {name}"));
    }
    client
        .goto(&format!("{base}/locks"))
        .await
        .expect("locks page");
    let unlock = client
        .find_all(Locator::Css(r#"a[href$="/unlock"]"#))
        .await
        .expect("links");
    assert!(unlock.is_empty(), "a viewer sees Unlock");
    client.close().await.expect("close the browser");
}

/// Chromium's console since the last read: chromedriver's log endpoint (`goog:loggingPrefs`
/// asks for it), which WebDriver's standard lacks and fantoccini sends as a custom command.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_owned()),
        )
    }
}

/// The console's errors (level SEVERE: script errors, failed loads, CSP violations) since the
/// last read.
async fn console_errors(client: &Client) -> Vec<String> {
    let log = client
        .issue_cmd(BrowserLog)
        .await
        .expect("the browser's log");
    log.as_array()
        .expect("log entries")
        .iter()
        .filter(|entry| entry["level"] == "SEVERE")
        .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Saves a screenshot of the charts to `target/tmp/`, and to the directory
/// `LOCK_DASHBOARD_SCREENSHOTS` names (`../docs`: the pictures of the dashboard's README).
fn save_chart_screenshot(name: &str, png: &[u8]) {
    save(name, png, false);
    if let Some(dir) = std::env::var_os("LOCK_DASHBOARD_SCREENSHOTS") {
        std::fs::write(std::path::Path::new(&dir).join(name), png)
            .expect("save the README's screenshot");
    }
}

/// A job at a 250 ms rate whose body is `outcome(n)` for its `n`th run (from 0), after
/// sleeping 15 to 60 ms by `n` (durations to spread).
fn counted(name: &str, outcome: fn(usize) -> bool) -> Job {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Job::new(
        name,
        Trigger::fixed_rate(Duration::from_millis(250)).expect("trigger"),
        move |_ctx: JobContext| {
            let n = runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(15 * (n as u64 % 4 + 1))).await;
                if outcome(n) {
                    Ok(())
                } else {
                    Err(std::io::Error::other(format!("run {n} failed")))
                }
            }
        },
    )
}

/// The jobs of the charts' test.
const JOBS: [&str; 4] = ["mixed", "never", "broke_early", "broke_late"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_show_outcomes_durations_success_and_lock_wait_without_console_errors() {
    let Some(driver) = start_driver().await else {
        return;
    };
    let Some((provider, _table, _cleanup)) = provider().await else {
        return;
    };
    // `mixed` fails every third run; `broke_early` succeeds twice then fails, `broke_late`
    // eight times then fails: among the failing, `never` (no success) comes first, then
    // `broke_early` (its last success is older), then `broke_late`.
    let scheduler = Scheduler::builder()
        .lock_provider(Arc::clone(&provider))
        .instance_id("charts-a")
        .history(Duration::from_secs(3600))
        .jobs([
            counted("mixed", |n| n % 3 != 2),
            counted("never", |_| false),
            counted("broke_early", |n| n < 2),
            counted("broke_late", |n| n < 8),
        ])
        .start()
        .await
        .expect("scheduler");
    let address = serve_app(Dashboard::new(Arc::clone(&provider)).router()).await;
    let base = format!("http://{address}");
    let store = provider.cluster().expect("operations tables");
    eventually(WAIT, "12 runs of mixed and broke_late failing", || async {
        let mixed = store.history("mixed", 100).await.ok()?;
        let late = store.history("broke_late", 1).await.ok()?;
        (mixed.iter().filter(|run| run.ended_at.is_some()).count() >= 12
            && late.first()?.outcome == lock_cluster::RunState::Failed)
            .then_some(())
    })
    .await;

    let client = browser(&driver).await;
    // Tall enough for the four charts in one screenshot.
    client
        .set_window_size(1400, 1100)
        .await
        .expect("window size");
    client
        .goto(&format!("{base}/jobs/mixed?refresh=0"))
        .await
        .expect("mixed's page");
    for chart in [
        "chart-timeline",
        "chart-durations",
        "chart-success-rate",
        "chart-lock-wait",
    ] {
        let svg = client
            .find(Locator::Css(&format!(
                r#"figure#{chart} svg[role="img"][aria-label]"#
            )))
            .await
            .unwrap_or_else(|e| panic!("the {chart} chart: {e}"));
        let marks = svg
            .find_all(Locator::Css("rect title"))
            .await
            .expect("marks");
        assert!(!marks.is_empty(), "{chart} draws no mark with a title");
    }
    // Both outcomes drawn and counted; the numbers also as text.
    client
        .find(Locator::Css("#chart-timeline rect.mark.succeeded"))
        .await
        .expect("succeeded runs on the timeline");
    client
        .find(Locator::Css("#chart-timeline rect.mark.failed"))
        .await
        .expect("failed runs on the timeline");
    let legend = text_of(&client, "#chart-timeline ul.legend").await;
    assert!(
        legend.contains("succeeded") && legend.contains("failed"),
        "{legend}"
    );
    for chart in ["chart-durations", "chart-lock-wait"] {
        let numbers = text_of(&client, &format!("#{chart} p.numbers")).await;
        assert!(
            numbers.contains("p50 ") && numbers.contains("p95 "),
            "{chart}: {numbers}"
        );
        for line in ["p50", "p95"] {
            client
                .find(Locator::Css(&format!("#{chart} line.percentile.{line}")))
                .await
                .unwrap_or_else(|e| panic!("{chart}'s {line} line: {e}"));
        }
    }
    // Every third run failed: the rate over the window is about two thirds, never all or none.
    let rate = text_of(&client, "#chart-success-rate strong.rate").await;
    let percent: f64 = rate
        .split(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a rate: {rate}"));
    assert!((50.0..=80.0).contains(&percent), "{rate}");
    let window = text_of(&client, "#chart-window").await;
    assert!(
        window.contains("the last") && window.contains("at most 200"),
        "{window}"
    );
    let errors = console_errors(&client).await;
    assert!(
        errors.is_empty(),
        "console errors on the Job page: {errors:?}"
    );
    let section = client
        .find(Locator::Css("section.charts-section"))
        .await
        .expect("the charts' section");
    save_chart_screenshot(
        "dashboard-job-charts.png",
        &section.screenshot().await.expect("screenshot"),
    );

    // Paused, so that each job's newest run has ended with its own outcome: a job whose
    // newest run is still going is not failing (the Jobs page's rule), and the four jobs fire
    // at the same instants. (A shutdown would cancel the running bodies.)
    for job in JOBS {
        store.pause(job, "test").await.expect("pause");
    }
    let paused_at = store
        .control()
        .await
        .expect("control")
        .iter()
        .map(|c| c.requested_at)
        .max()
        .expect("pause rows");
    eventually(WAIT, "a heartbeat after the pauses", || async {
        let registry = store.registry().await.ok()?;
        registry
            .iter()
            .any(|row| row.job.is_none() && row.heartbeat_at > paused_at)
            .then_some(())
    })
    .await;
    // A fire already under way at the heartbeat (one slot at most) runs; none after it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    eventually(WAIT, "the newest run of each job ended", || async {
        for job in JOBS {
            store.history(job, 1).await.ok()?.first()?.ended_at?;
        }
        Some(())
    })
    .await;
    client
        .goto(&format!("{base}/?refresh=0"))
        .await
        .expect("jobs page");
    let listed = client
        .find_all(Locator::Css("#most-failing li"))
        .await
        .expect("the most failing jobs");
    let mut order = Vec::new();
    for item in &listed {
        order.push(
            item.attr("data-job")
                .await
                .expect("attr")
                .expect("data-job"),
        );
    }
    assert_eq!(
        order.get(..3),
        Some(&["never", "broke_early", "broke_late"].map(String::from)[..]),
        "{order:?}"
    );
    client
        .find(Locator::Css(
            r#"#chart-most-failing svg[role="img"] rect.bar.never title"#,
        ))
        .await
        .expect("never's bar");
    let errors = console_errors(&client).await;
    assert!(
        errors.is_empty(),
        "console errors on the Jobs page: {errors:?}"
    );
    save_chart_screenshot(
        "dashboard-jobs-failing.png",
        &client.screenshot().await.expect("screenshot"),
    );

    // The log does see a violation of the policy: an image from elsewhere is refused.
    client
        .execute(
            "const img = document.createElement('img'); \
             img.src = 'http://198.51.100.1/pixel.png'; document.body.append(img);",
            vec![],
        )
        .await
        .expect("add an image from elsewhere");
    let seen = eventually(WAIT, "the CSP violation in the console", || {
        let client = client.clone();
        async move {
            let errors = console_errors(&client).await;
            errors
                .iter()
                .any(|e| e.contains("Content Security Policy"))
                .then_some(errors)
        }
    })
    .await;
    assert!(!seen.is_empty());

    client.close().await.expect("close the browser");
    scheduler.shutdown().await.expect("shutdown");
}

async fn text_of(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .expect("its text")
}

/// A run's log lines on its page: a job logs eleven lines (one with HTML in it) under a bound
/// of five; the Job page links the run to its page, which shows the first five lines as text
/// (the HTML escaped, not run) and says how many were not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_page_shows_its_log_lines_bounded_and_escaped() {
    let Some(driver) = start_driver().await else {
        return;
    };
    let Some((provider, _table, _cleanup)) = provider().await else {
        return;
    };
    let ledger = Job::new(
        "ledger",
        Trigger::cron("0 0 3 1 1 *").expect("cron"),
        |_ctx: JobContext| async move {
            tracing::info!("<script>document.title='pwned'</script> & \"quoted\"");
            tracing::debug!("a debug line, not kept");
            for i in 1..=10 {
                tracing::warn!(entry = i, "posted entry");
            }
        },
    );
    let scheduler = Scheduler::builder()
        .lock_provider(Arc::clone(&provider))
        .instance_id("instance-logs")
        .run_logs(lock_scheduler::RunLogs::default().max_lines(5))
        .jobs([ledger])
        .start()
        .await
        .expect("scheduler");
    scheduler.trigger("ledger").await.expect("a manual run");
    let address = serve_app(Dashboard::new(Arc::clone(&provider)).router()).await;
    let base = format!("http://{address}");
    let client = browser(&driver).await;

    client
        .goto(&format!("{base}/jobs/ledger?refresh=0"))
        .await
        .expect("the job page");
    client
        .find(Locator::Css("#runs tbody tr td a"))
        .await
        .expect("the run's link on the job page")
        .click()
        .await
        .expect("open the run's page");
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#log"))
        .await
        .expect("the run page's log lines");
    assert!(
        client
            .current_url()
            .await
            .expect("url")
            .path()
            .contains("/jobs/ledger/runs/"),
        "the link leads to the run's page"
    );
    let rows = client
        .find_all(Locator::Css("#log tbody tr"))
        .await
        .expect("the lines");
    assert_eq!(rows.len(), 5, "max_lines(5)");
    let first = rows[0].text().await.expect("the first line");
    assert!(
        first.contains("<script>document.title='pwned'</script> & \"quoted\""),
        "shown as text: {first}"
    );
    assert!(first.contains("INFO"), "{first}");
    assert!(
        client
            .find_all(Locator::Css("#log script"))
            .await
            .expect("scripts")
            .is_empty(),
        "the logged HTML is not markup"
    );
    assert_ne!(client.title().await.expect("title"), "pwned");
    let last = rows[4].text().await.expect("the fifth line");
    assert!(
        last.contains("WARN") && last.contains("posted entry entry=4"),
        "{last}"
    );
    let page = client.source().await.expect("source");
    assert!(
        !page.contains("a debug line"),
        "DEBUG is below the level kept"
    );
    let cut = client
        .find(Locator::Css("#log-cut"))
        .await
        .expect("the notice of lines not kept")
        .text()
        .await
        .expect("notice");
    assert!(cut.contains("6 more lines not kept"), "{cut}");
    let facts = client
        .find(Locator::Css("#run"))
        .await
        .expect("the run's facts")
        .text()
        .await
        .expect("facts");
    assert!(
        facts.contains("succeeded") && facts.contains("instance-logs"),
        "{facts}"
    );
    save(
        "dashboard-run-logs.png",
        &client.screenshot().await.expect("screenshot"),
        false,
    );
    client.close().await.expect("close the browser");
    scheduler.shutdown().await.expect("shutdown");
}
