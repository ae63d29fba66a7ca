//! Hostile inputs through the distributed farm (real dispatcher, worker, RabbitMQ, Garage): an
//! uploaded HLS playlist, a file whose header lies about its duration, and one with more
//! frames than the farm admits. Each job fails with its code and a reason naming the input,
//! nothing is delivered, and the dispatcher answers `/healthz` promptly all the while.

use std::process::Command;
use std::time::{Duration, Instant};

use tessera_tests::farm::{Farm, MAX_INPUT_FRAMES, TOKEN};
use tessera_tests::fixture::truncated_copy;

const JOB_TIMEOUT: Duration = Duration::from_secs(180);
/// Slowest `/healthz` answer accepted while the hostile jobs are handled.
const HEALTHZ_LIMIT: Duration = Duration::from_secs(1);

/// ffmpeg with `args` (whitespace-separated) writing `out`.
fn ffmpeg_to(args: &str, out: &std::path::Path) {
    let mut all: Vec<&str> = args.split_whitespace().collect();
    all.push(out.to_str().expect("utf-8 path"));
    tessera_tests::fixture::ffmpeg(&all);
}

/// How long one `/healthz` call takes, and whether it answered "ok".
fn healthz(farm: &Farm) -> (Duration, bool) {
    let started = Instant::now();
    let out = Command::new("curl")
        .args(["-sS", "-m", "5"])
        .arg(format!("{}/healthz", farm.api))
        .output()
        .expect("curl");
    (
        started.elapsed(),
        String::from_utf8_lossy(&out.stdout).trim() == "ok",
    )
}

#[test]
fn hostile_inputs_fail_with_reasons_while_the_dispatcher_answers() {
    let farm = Farm::start("hostile", 1);
    let dir = tempfile::tempdir().expect("tempdir");

    // A playlist that would make a demuxer fetch local files and a metadata endpoint,
    // uploaded under a video name.
    let playlist = dir.path().join("playlist.mp4");
    std::fs::write(
        &playlist,
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\nfile:///etc/passwd\n\
         #EXTINF:4.0,\nhttp://169.254.169.254/latest/meta-data/\n#EXT-X-ENDLIST\n",
    )
    .expect("write playlist");
    // A Matroska file cut in half: its header still promises 6 s.
    let whole = dir.path().join("whole.mkv");
    ffmpeg_to(
        "-f lavfi -i testsrc2=size=320x240:rate=25:duration=6 -f lavfi -i sine=duration=6 \
         -c:v libx264 -preset veryfast -bf 3 -c:a aac",
        &whole,
    );
    let len = std::fs::metadata(&whole).expect("stat").len();
    let lying = truncated_copy(&whole, dir.path(), "lying.mkv", len / 2);
    // Twice the farm's frame limit of tiny frames (a few seconds to make).
    let many = dir.path().join("many.mkv");
    let seconds = 2 * MAX_INPUT_FRAMES / 25;
    ffmpeg_to(
        &format!(
            "-f lavfi -i color=c=gray:size=16x16:rate=25:duration={seconds} \
             -c:v libx264 -preset ultrafast -x264-params keyint=250"
        ),
        &many,
    );

    let cases = [
        (&playlist, "input_unsupported", "HLS playlist"),
        (&lying, "source_corrupt", "truncated"),
        (&many, "input_unsupported", "video frames, over the limit"),
    ];
    let mut jobs = Vec::new();
    for (path, _, _) in &cases {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        farm.upload(path, "input", &format!("hostile/{name}"));
        let id = farm.submit(
            &format!("s3://input/hostile/{name}"),
            &format!("s3://output/hostile/{name}.mp4"),
            serde_json::json!({"preset": "veryfast"}),
            serde_json::json!({}),
        );
        jobs.push((id, name));
    }

    // While the jobs run: /healthz every 10 ms from a thread of its own.
    let started = Instant::now();
    let (mut slowest, mut answers) = (Duration::ZERO, 0);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let poller = scope.spawn(|| {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                seen.push(healthz(&farm));
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        });
        loop {
            let ended = jobs.iter().all(|(id, _)| {
                let (_, job) = farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None);
                matches!(job["state"].as_str(), Some("done" | "failed" | "cancelled"))
            });
            if ended {
                break;
            }
            assert!(
                started.elapsed() < JOB_TIMEOUT,
                "hostile jobs still running"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        for (took, ok) in poller.join().expect("poller") {
            assert!(ok, "/healthz did not answer ok after {took:?}");
            slowest = slowest.max(took);
            answers += 1;
        }
    });
    assert!(
        answers >= 5,
        "only {answers} /healthz answers while the jobs ran"
    );
    println!("/healthz: {answers} answers, slowest {slowest:?}");
    assert!(
        slowest < HEALTHZ_LIMIT,
        "slowest /healthz took {slowest:?} over {answers} calls"
    );

    for ((id, name), (_, code, reason)) in jobs.iter().zip(&cases) {
        let job = farm.wait_job(id, JOB_TIMEOUT);
        assert_eq!(job["state"], "failed", "{name}: {job}");
        assert_eq!(job["error"]["code"], *code, "{name}: {job}");
        let message = job["error"]["message"].as_str().unwrap_or("");
        println!("{name}: {code}: {message}");
        assert!(
            message.contains(name.as_str()) && message.contains(reason),
            "{name}: {message}"
        );
    }
    let delivered = farm.list("output", "hostile/");
    assert!(delivered.is_empty(), "delivered: {delivered:?}");
    assert!(
        farm.log("dispatcher.log").matches("panicked").count() == 0,
        "the dispatcher panicked"
    );
}
