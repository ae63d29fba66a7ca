//! `tessera-gpu-smoke`: the steps and checks of the GPU smoke test, run by
//! `scripts/gpu-smoke.sh` on a machine with an NVIDIA card (see that script for the bundle it
//! is copied in). It proves that tessera's GPU path works through the worker's own code: the
//! NVML inventory, an NVDEC decode check, and seven `tessera transcode` cases (same size,
//! resize, HEVC, 10-bit, a ladder, more segments than the session budget, an AV1 source),
//! each checked for frames, size, codec, PSNR against the source, the decoder and encoders
//! its segments reported, NVENC sessions against each card's budget and 10-bit formats and
//! tags; then each check run on input it must catch; then a table and a verdict.
//!
//! Why a binary and not only an integration test: the card's host has the NVIDIA driver and
//! glibc, no cargo and no FFmpeg tools. It needs only `tessera` (frames are counted with
//! `tessera probe`), and uses no FFmpeg library itself. The checks are unit-tested
//! (`cargo test -p tessera-tests --bin tessera-gpu-smoke`); `tests/tests/gpu_smoke.rs` runs
//! it where cargo is.
//!
//! `tessera-gpu-smoke --tessera PATH --clips DIR [--out DIR] [--timeout S] [--self-test]`
//! Exit status: 0 when every case that could run passed (or there is no card, said
//! plainly), 1 when one failed, 2 on bad arguments.

mod cases;
mod checks;
mod programs;
mod smoke;
mod steps;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str =
    "usage: tessera-gpu-smoke --tessera PATH --clips DIR [--out DIR] [--timeout S] [--self-test]";

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)) {
        Ok(mut smoke) => ExitCode::from(smoke.run()),
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The settings from the command line; `--self-test` runs the cases with `--gpu off`.
fn parse(mut args: impl Iterator<Item = String>) -> Result<smoke::Smoke, String> {
    let (mut tessera, mut clips) = (None, None);
    let (mut out, mut timeout, mut self_test) = (PathBuf::from("gpu-smoke"), 300, false);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--tessera" => tessera = Some(PathBuf::from(value()?)),
            "--clips" => clips = Some(PathBuf::from(value()?)),
            "--out" => out = PathBuf::from(value()?),
            "--timeout" => {
                let v = value()?;
                timeout = v
                    .parse()
                    .map_err(|_| format!("--timeout {v}: not seconds"))?;
            }
            "--self-test" => self_test = true,
            _ => return Err(format!("unknown argument: {arg}")),
        }
    }
    let tessera = tessera.ok_or("--tessera is needed")?;
    let clips = clips.ok_or("--clips is needed")?;
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(smoke::Smoke::new(
        tessera,
        clips,
        out,
        Duration::from_secs(timeout),
        self_test,
    ))
}
