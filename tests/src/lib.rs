//! Integration-test harness for tessera.
//!
//! The tests in `tests/tests/*.rs` run the real `tessera` binary (built by
//! `cargo build -p tessera-cli`, or named by `$TESSERA_BIN`) on fixtures
//! made with the `ffmpeg` CLI, and judge the results with `ffprobe` and
//! `ffmpeg`'s `psnr` filter as the oracle. FFmpeg's CLIs are used only to
//! make inputs and to measure outputs, never to produce what is tested.
//!
//! Modules:
//! - [`run`]: starting programs with captured output and a timeout,
//!   locating the binary ([`tessera_bin`], [`run_tessera`]).
//! - [`fixture`]: the input kinds ([`Fixture`]), built once and cached.
//! - [`probe`]: ffprobe helpers ([`frame_count`], [`probe_frames`],
//!   [`stream_info`], [`psnr`], ...).
//! - [`job`]: one transcode in a private temp dir ([`Job`]) and its
//!   [`Report`].
//! - [`playback`]: what a file plays as ([`Summary`]) and whether an output plays as
//!   its source ([`playback::compare_media`]).
//! - [`summary`]: what a file plays as ([`summary::Summary`]: frames in playing order, audio
//!   tracks, metadata), which playback and sync read.
//! - [`sync`]: A/V sync at every second, from the white flash and beep markers the matrix
//!   sources carry ([`sync::check_sync`], part of [`playback::compare_media`]).
//! - [`check`]: the invariants of a transcode run ([`check_transcode`],
//!   [`transcode_and_check`]).
//! - [`matrix`]: a generated matrix of inputs (container x video x audio x
//!   timing), each checked into a pass/fail row ([`matrix::check`]), and
//!   generated bad inputs ([`matrix::bad_inputs`]).
//! - [`farm`]: the distributed farm as real processes (with [`garage`] and [`rabbit`]);
//!   [`bench`]: the distributed benchmark on it; [`docker_farm`]: the compose farm on a
//!   real Docker engine. The scripts `bench/distributed.sh` and
//!   `scripts/docker-farm-test.sh` run their ignored tests; `scripts/gpu-smoke.sh` runs the
//!   `tessera-gpu-smoke` binary (`src/bin/`), which needs no cargo on the card's host.
//! - [`webdriver`]: headless Chromium through chromedriver, for the dashboard's browser
//!   test (`tests/ui_browser.rs`).
//! - [`upgrade`]: a rolling upgrade of the compose farm under load, old release to this
//!   one (`scripts/rolling-upgrade.sh` runs its ignored test).
//!
//! Environment: `TESSERA_BIN` (binary path), `TESSERA_TEST_TIMEOUT_S`
//! (per-run limit, default 300), `TESSERA_FIXTURE_DIR` (fixture cache,
//! default `target/tessera-fixtures`), `TESSERA_KEEP_TMP` (keep each job's
//! temp dir for debugging).

pub mod amqp_door;
pub mod bench;
pub mod chaos;
pub mod check;
pub mod docker_farm;
pub mod farm;
mod farm_jobs;
mod farm_workers;
pub mod fixture;
pub mod garage;
pub mod imds;
pub mod job;
pub mod matrix;
pub mod playback;
pub mod poison;
pub mod probe;
pub mod rabbit;
pub mod run;
pub mod s3_faults;
pub mod soak;
pub mod stills;
pub mod streaming;
pub mod summary;
pub mod sync;
pub mod upgrade;
pub mod webdriver;

pub use check::{check_transcode, transcode_and_check, Comparison};
pub use fixture::{fixture, Fixture};
pub use job::{Job, Report};
pub use playback::Summary;
pub use probe::{format_start, frame_count, probe_frames, psnr, stream_info, streams_of};
pub use run::{run_tessera, tessera_bin, Run};
