//! Disk full on real small filesystems (tmpfs mounts; CI runs as root) under a running job
//! (issue 9): a worker's staging fills while it encodes, and the dispatcher's database
//! volume fills while a job runs. No job is lost or failed, nothing is delivered twice, and
//! the farm finishes the work once space returns.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::{Farm, TOKEN};
use tessera_tests::fixture::{fixture, Fixture};

const JOB_TIMEOUT: Duration = Duration::from_secs(300);

/// A tmpfs mounted for the test's life.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, mib: u64) -> Tmpfs {
        std::fs::create_dir_all(path).expect("mount point");
        let size = format!("size={mib}m");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mounting a {mib} MiB tmpfs at {} failed (the disk-full tests need root, as CI \
             has): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { path: path.into() }
    }

    /// Fills the filesystem until a write fails with "no space"; returns the filler.
    fn fill(&self) -> PathBuf {
        let filler = self.path.join("filler");
        let mut f = std::fs::File::create(&filler).expect("filler");
        let chunk = vec![0u8; 1 << 20];
        loop {
            if let Err(e) = f.write_all(&chunk).and_then(|_| f.flush()) {
                assert_eq!(e.raw_os_error(), Some(28), "filling: {e}");
                break;
            }
        }
        // Bytes short of a whole chunk too.
        while f.write_all(&chunk[..4096]).is_ok() {}
        assert!(tessera_farm::disk::free_bytes(&self.path) < 8192);
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn submit(farm: &Farm, kind: Fixture, key: &str) -> (String, u16, serde_json::Value) {
    let name = format!("{key}.src.mp4");
    farm.upload(&fixture(kind), "input", &name);
    let body = json!({
        "input": format!("s3://input/{name}"),
        "outputs": [{"destination": format!("s3://output/{key}"), "preset": "medium"}],
        "segment_seconds": 1,
    });
    let (code, resp) = farm.http("POST", "/v1/jobs", Some(TOKEN), Some(&body.to_string()));
    let id = resp["id"].as_str().unwrap_or("").to_string();
    (id, code, resp)
}

fn wait_log(farm: &Farm, log: &str, needle: &str) {
    let started = Instant::now();
    while !farm.log(log).contains(needle) {
        assert!(
            started.elapsed() < JOB_TIMEOUT,
            "{log} never said '{needle}':\n{}",
            farm.log(log)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_worker_whose_staging_fills_mid_job_pauses_and_finishes_when_space_returns() {
    let mut farm = Farm::start("diskfull", 0);
    let disk = Tmpfs::mount(&farm.dir.path().join("worker-0"), 256);
    farm.add_worker_with(0, &["--min-free-mib", "8"]);
    let (id, code, resp) = submit(&farm, Fixture::Hd720Long, "diskfull.mp4");
    assert_eq!(code, 202, "{resp}");
    farm.wait_for_segment_in_progress(0, JOB_TIMEOUT);
    // The disk fills under the encode (another process, a log, a neighbour's download).
    let filler = disk.fill();
    wait_log(&farm, "worker-0.log", "worker unfit");
    // Paused, not failing: the job waits with its segments intact.
    std::thread::sleep(Duration::from_secs(6));
    let job = farm.job(&id);
    assert_eq!(job["state"], "encoding", "{job}");
    // Every attempt the full disk broke is the worker's fault (no delivery spent), whether
    // the download or the encoder's writes found no space.
    let log = farm.log("worker-0.log");
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("task attempt failed"))
        .collect();
    assert!(
        failed.iter().all(|l| l.contains("code=worker_unfit")),
        "a full disk was charged to the task:\n{}",
        failed.join("\n")
    );
    std::fs::remove_file(filler).expect("free the disk");
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::Hd720Long), "diskfull.mp4");
    assert!(farm.workers_alive(), "the worker died of a full disk");
    assert!(farm.log("worker-0.log").contains("worker fit again"));
}

#[test]
fn a_full_database_volume_refuses_new_jobs_with_503_and_loses_none() {
    let mut farm = Farm::start("dbfull", 1);
    let volume = Tmpfs::mount(&farm.dir.path().join("dbvol"), 16);
    farm.db = "dbvol/jobs.db".into();
    farm.start_dispatcher();
    let (id, code, resp) = submit(&farm, Fixture::Hd720Long, "dbfull.mp4");
    assert_eq!(code, 202, "{resp}");
    farm.wait_segments_done(&id, 1, JOB_TIMEOUT);
    let filler = volume.fill();
    // New work is refused with a retryable status and the reason; reads still work.
    let (_, code, resp) = submit(&farm, Fixture::ClosedGopH264, "dbfull-later.mp4");
    assert_eq!(code, 503, "{resp}");
    assert_eq!(resp["error"]["code"], "db_unavailable", "{resp}");
    let job = farm.job(&id);
    assert_eq!(job["state"], "encoding", "{job}");
    std::thread::sleep(Duration::from_secs(5));
    std::fs::remove_file(filler).expect("free the volume");
    let job = farm.wait_job(&id, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&fixture(Fixture::Hd720Long), "dbfull.mp4");
    let (later, code, resp) = submit(&farm, Fixture::ClosedGopH264, "dbfull-later.mp4");
    assert_eq!(code, 202, "{resp}");
    let job = farm.wait_job(&later, JOB_TIMEOUT);
    assert_eq!(job["state"], "done", "{job}");
    let (_, list) = farm.http("GET", "/v1/jobs", Some(TOKEN), None);
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(2), "{list}");
}
