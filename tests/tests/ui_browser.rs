//! The operator's dashboard (`/ui`) in a real browser: headless Chromium through WebDriver
//! against the real farm (dispatcher, a worker, RabbitMQ, Garage). It signs in with the API
//! token, watches a job reach `done` on its page (the page reloads itself; no script), cancels
//! a long job from its page and runs it again (cancelled in turn), opens a job whose input key
//! and title (container metadata) are HTML and script (the page shows both as text and no
//! alert opens), sees a dead letter counted on the queues page, the worker on the workers
//! page (taking work with the long job's segment in hand, from its status reports; then its
//! last hour's segments), and a failed job's code on the throughput page. The list shows them
//! all.
//!
//! Screenshots go to `$TESSERA_UI_SCREENSHOTS` (default `target/ui-screenshots`);
//! `TESSERA_UI_SCREENSHOTS=docs/ui` refreshes the ones docs/operations.md shows.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::webdriver::{require_browser, Browser};

/// Longest wait for a page to show what it should.
const PAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the short job to end.
const JOB_TIMEOUT: Duration = Duration::from_secs(90);
/// An input key a careless page would run as script.
const HOSTILE_KEY: &str = "ui/<script>alert(1)</script><img src=x onerror=alert(2)>.mp4";
/// The title in that input's metadata.
const HOSTILE_TITLE: &str = "<script>alert(3)</script><b>bold</b> & \"title\"";

fn screenshot_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    match std::env::var_os("TESSERA_UI_SCREENSHOTS") {
        Some(dir) => root.join(dir),
        None => root.join("target/ui-screenshots"),
    }
}

/// Signs in through the form and lands on the jobs list.
fn sign_in(browser: &Browser, api: &str) {
    browser.goto(&format!("{api}/ui/jobs"));
    assert!(
        browser.url().ends_with("/ui/login"),
        "not sent to sign in: {}",
        browser.url()
    );
    let field = browser.find("#token").expect("token field");
    browser.type_into(&field, TOKEN).expect("type token");
    browser
        .click(&browser.find("#sign-in").expect("sign-in button"))
        .expect("sign in");
    let heading = browser.text_of("main h1", PAGE_TIMEOUT);
    assert_eq!(heading, "Jobs", "after sign-in: {}", browser.url());
}

/// Waits until the job page's state (the page reloads itself) is `want`; the states seen.
fn watch_state(browser: &Browser, want: &str, timeout: Duration) -> Vec<String> {
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let state = browser.text_of("#state", PAGE_TIMEOUT);
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        if state == want {
            return seen;
        }
        assert!(
            started.elapsed() < timeout,
            "job page still says {state} after {timeout:?} (seen {seen:?})"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Clicks the job page's cancel button, again if a reload of the page took the first click.
fn cancel_from_page(browser: &Browser) {
    let started = Instant::now();
    while started.elapsed() < PAGE_TIMEOUT {
        if let Ok(button) = browser.find("#cancel") {
            if browser.click(&button).is_ok() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no cancel button on {}", browser.url());
}

/// Submits a job from `s3://input/{key}` to `s3://output/{out}` through the API.
fn submit(farm: &Farm, key: &str, out: &str) -> String {
    let (input, output) = (format!("s3://input/{key}"), format!("s3://output/{out}"));
    farm.submit(&input, &output, Default::default(), Default::default())
}

/// A short job, watched on its page until done (the page reloads itself while it runs).
fn done_on_its_page(farm: &Farm, browser: &Browser, shots: &Path) -> String {
    farm.upload(&fixture(Fixture::ClosedGopH264), "input", "ui/clip.mp4");
    let id = submit(farm, "ui/clip.mp4", "ui/clip.mp4");
    browser.goto(&format!("{}/ui/jobs/{id}", farm.api));
    let seen = watch_state(browser, "done", JOB_TIMEOUT);
    eprintln!("short job states seen on its page: {seen:?}");
    assert_eq!(
        browser.text_of("main h1", PAGE_TIMEOUT),
        format!("Job {id}")
    );
    assert!(
        browser.source().contains("s3://output/ui/clip.mp4"),
        "outputs shown"
    );
    // The segment timeline: a row (and a bar) per segment, each on the farm's one worker,
    // its first try, its frames checked.
    let runs = browser.text_of("#segment-runs", PAGE_TIMEOUT);
    let segments = farm.job(&id)["segments_total"].as_u64().unwrap_or(0) as usize;
    let page = browser.source();
    assert!(segments > 1, "{}", farm.job(&id));
    assert_eq!(
        page.matches(r#"<td class="worker">w0</td>"#).count(),
        segments,
        "{runs}"
    );
    assert_eq!(
        page.matches(r#"<rect class="run""#).count(),
        segments,
        "{page}"
    );
    assert!(runs.contains("passed") && runs.contains("CPU"), "{runs}");
    browser.screenshot(shots, "job-done.png");
    id
}

/// A long job (120 one-second segments for one worker), cancelled from its page.
fn cancelled_from_its_page(farm: &Farm, browser: &Browser, shots: &Path) -> String {
    let long = farm.dir.path().join("long.mp4");
    let args = "-f lavfi -i testsrc2=size=160x120:rate=25:duration=120 -c:v libx264 \
                -preset ultrafast -g 25";
    let mut args: Vec<&str> = args.split_whitespace().collect();
    args.push(long.to_str().expect("utf-8 path"));
    tessera_tests::fixture::ffmpeg(&args);
    farm.upload(&long, "input", "ui/long.mp4");
    let id = submit(farm, "ui/long.mp4", "ui/long.mp4");
    browser.goto(&format!("{}/ui/jobs/{id}", farm.api));
    watch_state(browser, "encoding", JOB_TIMEOUT);
    browser.screenshot(shots, "job-encoding.png");
    fleet_shows_the_task_in_hand(farm, browser, &id, shots);
    browser.goto(&format!("{}/ui/jobs/{id}", farm.api));
    cancel_from_page(browser);
    watch_state(browser, "cancelled", PAGE_TIMEOUT);
    assert!(
        browser.find("#cancel").is_err(),
        "a cancelled job offers no cancel"
    );
    let (_, api_view) = farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
    assert_eq!(api_view["state"], "cancelled", "the API agrees: {api_view}");
    // Run again: a new job with the same request, on its own page; cancelled in turn.
    let retry = browser
        .find("#retry")
        .expect("a cancelled job can be run again");
    browser.click(&retry).expect("run again");
    let again = wait_for_other_job(browser, &id);
    let (_, again_view) = farm.http("GET", &format!("/v1/jobs/{again}"), Some(TOKEN), None);
    assert_eq!(again_view["input"], api_view["input"], "the same request");
    cancel_from_page(browser);
    watch_state(browser, "cancelled", PAGE_TIMEOUT);
    id
}

/// The workers page while the long job encodes: the farm's worker reports itself taking work
/// with a segment of job `id` in hand (its status reports come every 5 s).
fn fleet_shows_the_task_in_hand(farm: &Farm, browser: &Browser, id: &str, shots: &Path) {
    let started = Instant::now();
    loop {
        browser.goto(&format!("{}/ui/workers", farm.api));
        let fleet = browser.text_of("#fleet", PAGE_TIMEOUT);
        let row = fleet.lines().find(|l| l.contains("w0")).unwrap_or_default();
        if row.contains("taking work") && fleet.contains(&format!("{id} segment ")) {
            let summary = browser.text_of("#fleet-summary", PAGE_TIMEOUT);
            assert!(
                summary.starts_with("1 reporting, 0 draining, 0 silent"),
                "{summary}"
            );
            assert!(
                browser.find("#fleet a").is_ok(),
                "the task links to its job"
            );
            browser.screenshot(shots, "workers.png");
            return;
        }
        assert!(
            started.elapsed() < PAGE_TIMEOUT,
            "the worker's task in hand not shown: {fleet}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The status queue deleted, as a broker restart deletes a non-durable queue: the worker
/// declares it again when its report comes back, the dispatcher before it consumes again, and
/// the workers page shows a report sent after the loss.
fn fleet_survives_a_lost_status_queue(farm: &Farm, browser: &Browser) {
    farm.vhost.delete_queue(tessera_model::wire::QUEUE_STATUS);
    let lost = Instant::now();
    loop {
        browser.goto(&format!("{}/ui/workers", farm.api));
        let fleet = browser.text_of("#fleet", PAGE_TIMEOUT);
        let row = fleet.lines().find(|l| l.contains("w0")).unwrap_or_default();
        let age = row
            .rsplit_once(" s ago")
            .and_then(|(head, _)| head.rsplit(char::is_whitespace).next())
            .and_then(|n| n.parse::<u64>().ok());
        let since = lost.elapsed().as_secs();
        if row.contains("taking work") && age.is_some_and(|a| a + 1 < since) {
            return;
        }
        assert!(
            lost.elapsed() < PAGE_TIMEOUT + Duration::from_secs(30),
            "no report heard since the status queue was lost {since} s ago: {row}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits for the browser to show a job page other than `id`'s; that job's id.
fn wait_for_other_job(browser: &Browser, id: &str) -> String {
    let started = Instant::now();
    loop {
        let url = browser.url();
        if let Some(other) = url.rsplit_once("/ui/jobs/").map(|(_, j)| j.to_string()) {
            let job_id = other.len() == 32 && other.bytes().all(|b| b.is_ascii_hexdigit());
            if job_id && other != id && browser.find("#state").is_ok() {
                return other;
            }
        }
        assert!(
            started.elapsed() < PAGE_TIMEOUT,
            "still on {url} after run again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A message no worker can read, put on the CPU encode queue: the worker dead-letters it,
/// the dispatcher takes it from the dead-letter queue and drops it, and the queues page
/// counts it.
fn dead_letter_counted(farm: &Farm, browser: &Browser) {
    farm.with_broker(|q| async move {
        use tessera_farm::queue::Queue;
        let queue = tessera_model::wire::QUEUE_ENCODE_CPU;
        q.publish(queue, b"not a task".to_vec())
            .await
            .expect("publish")
    });
    let started = Instant::now();
    loop {
        browser.goto(&format!("{}/ui/queues", farm.api));
        let counted = browser.text_of("#dead-letters", PAGE_TIMEOUT);
        if counted.contains("1 named no job") {
            return;
        }
        assert!(
            started.elapsed() < PAGE_TIMEOUT,
            "dead letter not counted: {counted}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The median time of 5 requests for `path` with the browser's session, straight from the
/// dispatcher (no browser in between). Printed, not judged: on a machine busy with other
/// farms a time says little (ui::bench in the dispatcher judges the pages' own cost).
fn answer_time(farm: &Farm, browser: &Browser, path: &str) -> Duration {
    let session = browser
        .cookie("tessera_session")
        .expect("the session cookie");
    let mut times: Vec<Duration> = (0..5)
        .map(|_| {
            let started = Instant::now();
            let resp = ureq::get(&format!("{}{path}", farm.api))
                .header("cookie", &format!("tessera_session={session}"))
                .call()
                .expect("page");
            assert_eq!(resp.status(), 200, "{path}");
            started.elapsed()
        })
        .collect();
    times.sort();
    times[2]
}

/// A job whose input key and title (container metadata) are markup: its page shows both as
/// text and runs nothing.
fn hostile_key_as_text(farm: &Farm, browser: &Browser, shots: &Path) -> String {
    let titled = farm.dir.path().join("titled.mp4");
    let (src, title) = (
        fixture(Fixture::ClosedGopH264),
        format!("title={HOSTILE_TITLE}"),
    );
    let args = ["-y", "-v", "error", "-i", path_str(&src), "-c", "copy"];
    tessera_tests::fixture::ffmpeg(
        &[&args[..], &["-metadata", &title, path_str(&titled)]].concat(),
    );
    farm.upload(&titled, "input", HOSTILE_KEY);
    let id = submit(farm, HOSTILE_KEY, "ui/evil.mp4");
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    browser.goto(&format!("{}/ui/jobs/{id}", farm.api));
    assert_eq!(
        browser.text_of("#title", PAGE_TIMEOUT),
        HOSTILE_TITLE,
        "the title as text"
    );
    let shown = browser.text_of("#input", PAGE_TIMEOUT);
    assert_eq!(
        shown,
        format!("s3://input/{HOSTILE_KEY}"),
        "the key as literal text"
    );
    assert_eq!(browser.alert_text(), None, "no alert opened");
    let source = browser.source();
    assert!(
        !source.contains("<script>alert(1)") && !source.contains("<img src=\"x\""),
        "raw markup in the DOM"
    );
    assert!(browser.find("main img").is_err() && browser.find("main script").is_err());
    browser.screenshot(shots, "job-hostile.png");
    id
}

#[test]
fn the_dashboard_in_a_browser_shows_jobs_cancels_and_escapes() {
    require_browser();
    let shots = screenshot_dir();
    let farm = Farm::start("ui", 1);
    let browser = Browser::start();
    sign_in(&browser, &farm.api);
    let done = done_on_its_page(&farm, &browser, &shots);
    let cancelled = cancelled_from_its_page(&farm, &browser, &shots);
    let hostile = hostile_key_as_text(&farm, &browser, &shots);

    // The list shows all three, and the hostile key as text there too.
    browser.goto(&format!("{}/ui/jobs", farm.api));
    let list = browser.text_of("table.jobs", PAGE_TIMEOUT);
    for id in [&done, &cancelled, &hostile] {
        assert!(list.contains(id.as_str()), "{id} listed:\n{list}");
    }
    assert!(list.contains(HOSTILE_KEY) && browser.alert_text().is_none());
    browser.screenshot(&shots, "jobs.png");
    dead_letter_counted(&farm, &browser);
    assert!(browser
        .text_of("#queues", PAGE_TIMEOUT)
        .contains("tessera.encode.cpu"));
    // The pools: nothing left to encode, and the farm's one CPU worker reporting.
    let pools = browser.text_of("#pools", PAGE_TIMEOUT);
    let cpu = pools
        .lines()
        .find(|l| l.starts_with("cpu"))
        .unwrap_or_default();
    let cells: Vec<&str> = cpu.split_whitespace().collect();
    assert_eq!(cells.first(), Some(&"cpu"), "{pools}");
    assert_eq!(cells.get(1), Some(&"0"), "no segment left: {pools}");
    assert_eq!(cells.last(), Some(&"1"), "one worker reporting: {pools}");
    browser.screenshot(&shots, "queues.png");
    // The workers page: the farm's one worker, with the short job's segments at least.
    browser.goto(&format!("{}/ui/workers", farm.api));
    let workers = browser.text_of("#workers", PAGE_TIMEOUT);
    assert!(
        workers.contains("w0") && workers.contains("CPU"),
        "{workers}"
    );
    fleet_survives_a_lost_status_queue(&farm, &browser);
    for path in ["/ui/jobs", "/ui/queues", "/ui/throughput", "/ui/workers"] {
        eprintln!(
            "{path}: {:?} (median of 5, RabbitMQ)",
            answer_time(&farm, &browser, path)
        );
    }
    // A job on an input that is not there fails; the day's failures count it by its code.
    let missing = submit(&farm, "ui/missing.mp4", "ui/missing.mp4");
    assert_eq!(farm.wait_job(&missing, JOB_TIMEOUT)["state"], "failed");
    browser.goto(&format!("{}/ui/throughput", farm.api));
    assert!(browser.find("#throughput").is_ok(), "the chart is drawn");
    let minutes = browser.source();
    assert!(
        minutes.contains("id=\"minutes\"") && !minutes.contains("max 0.0 min / hour"),
        "no minutes of video drawn"
    );
    let failures = browser.text_of("#failures", PAGE_TIMEOUT);
    assert!(
        failures.contains("input_unreadable"),
        "the missing input's failure: {failures}"
    );
    browser.screenshot(&shots, "throughput.png");
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
