//! Target-quality encoding of one segment: each rendition with a target searches its own rate
//! factor (tessera_model::target) by probe encodes of the whole segment at its final preset,
//! each scored against the segment's source frames (score.rs); the probe kept is the
//! segment's encode, so no final encode follows the search.
//!
//! Why in the media child: the probes need the chunk and the encoders, and the search is
//! cheapest where they are; the worker sees one encode that took a few rounds. On the
//! software path the segment's frames are decoded once and kept (frames.rs): every round
//! encodes from them and every score compares against them. Renditions without a target are
//! encoded in the first round only.
//!
//! Why no scouts at a faster preset: measured on bench/quality.sh's source (docs/architecture.md),
//! x264 `ultrafast` scouts placed the first probe worse than the rendition's own CRF did on
//! grain and fine detail (their VMAF at a CRF differs from `medium`'s by up to 13 points), and
//! the search took more CPU with them than without.

mod frames;
mod score;

use std::path::{Path, PathBuf};
use std::time::Instant;

use frames::SourceFrames;
use score::SUBSAMPLE;

use crate::MediaError;
use tessera_model::encode::{EncodeRequest, EncodeResult, RateControl, RenditionResult};
use tessera_model::encode::{RenditionOutput, TargetResult};
use tessera_model::settings::target_search;
use tessera_model::target::{Next, Probe, Search};

/// One rendition's search: its settings, the probes so far (with their files and results),
/// the next rate factor to probe, the probe kept.
struct Searching {
    search: Search,
    probes: Vec<(Probe, PathBuf, RenditionResult)>,
    next: Option<f64>,
    kept: Option<usize>,
}

/// One encode of every rendition of a request from one decode (the software or GPU path).
pub(crate) type EncodeOnce =
    dyn Fn(&EncodeRequest, &mut dyn FnMut(u64)) -> Result<EncodeResult, MediaError>;

/// Encodes `req` (which has at least one rendition with a target) by rounds of `encode` (the
/// software or GPU path, which must not search again: it encodes each rendition once at the
/// CRF in its `rate`), or from the segment's kept frames on the software path; `progress`
/// counts the first pass's frames.
pub(crate) fn encode_targeted(
    req: &EncodeRequest,
    progress: &mut dyn FnMut(u64),
    encode: &EncodeOnce,
) -> Result<EncodeResult, MediaError> {
    let kept = match req.hardware {
        None => SourceFrames::load(req, progress)?,
        Some(_) => None,
    };
    let mut first_pass = kept.is_none();
    let mut run = |sub: &EncodeRequest| match &kept {
        Some(frames) => frames.encode(sub),
        None if std::mem::take(&mut first_pass) => encode(sub, progress),
        None => encode(sub, &mut |_| {}),
    };
    let mut searching: Vec<Option<Searching>> = (req.outputs.iter())
        .map(|o| {
            let target = o.spec.target?;
            let search = target_search(&o.spec, &target, req.hardware.is_some());
            let hint = match o.spec.rate {
                RateControl::Crf(crf) => Some(f64::from(crf)),
                RateControl::Bitrate(_) => None,
            };
            Some(Searching {
                search,
                probes: Vec::new(),
                next: Some(search.first(hint)),
                kept: None,
            })
        })
        .collect();
    let mut results: Vec<Option<RenditionResult>> = vec![None; req.outputs.len()];
    let mut first: Option<EncodeResult> = None;
    let mut seconds = 0.0;
    for round in 0.. {
        // The renditions this round encodes: all in the first, then those still searching.
        let active: Vec<usize> = (0..req.outputs.len())
            .filter(|&i| match &searching[i] {
                Some(s) => s.next.is_some(),
                None => round == 0,
            })
            .collect();
        if active.is_empty() {
            break;
        }
        let sub = round_request(req, &searching, &active, round);
        let done = run(&sub)?;
        seconds += done.media_seconds;
        let probed: Vec<(usize, usize)> = (active.iter().enumerate())
            .filter(|(_, &i)| searching[i].is_some())
            .map(|(pos, &i)| (pos, i))
            .collect();
        let files: Vec<PathBuf> = (probed.iter())
            .map(|&(pos, _)| sub.outputs[pos].path.clone())
            .collect();
        let started = Instant::now();
        let scores = score::score_encodes(req, &files, kept.as_ref(), SUBSAMPLE)?;
        seconds += started.elapsed().as_secs_f64();
        for ((pos, i), vmaf) in probed.into_iter().zip(scores) {
            let s = searching[i].as_mut().expect("probed renditions search");
            let rate_factor = s.next.take().expect("a probe was due");
            let file = sub.outputs[pos].path.clone();
            s.probes.push((
                Probe { rate_factor, vmaf },
                file,
                done.renditions[pos].clone(),
            ));
            let so_far: Vec<Probe> = s.probes.iter().map(|p| p.0).collect();
            match s.search.next(&so_far) {
                Next::Probe(rf) => s.next = Some(rf),
                Next::Keep(k) => s.kept = Some(k),
            }
        }
        if round == 0 {
            for (pos, &i) in active.iter().enumerate() {
                if searching[i].is_none() {
                    results[i] = Some(done.renditions[pos].clone());
                }
            }
            first = Some(done);
        }
    }
    for (i, s) in searching.into_iter().enumerate() {
        if let Some(s) = s {
            results[i] = Some(keep(s, &req.outputs[i].path)?);
        }
    }
    Ok(EncodeResult {
        renditions: results
            .into_iter()
            .map(|r| r.expect("every rendition"))
            .collect(),
        media_seconds: seconds,
        ..first.expect("the first round ran")
    })
}

/// The request of one round: the active renditions, each still searching at its next rate
/// factor into a probe file of its own; stills only in the first round.
fn round_request(
    req: &EncodeRequest,
    searching: &[Option<Searching>],
    active: &[usize],
    round: u32,
) -> EncodeRequest {
    let outputs: Vec<RenditionOutput> = (active.iter())
        .map(|&i| {
            let mut out = req.outputs[i].clone();
            if let Some(rf) = searching[i].as_ref().and_then(|s| s.next) {
                // The target stays: the encoder's headers are then the same at every CRF.
                out.spec.rate = RateControl::Crf(rf as f32);
                out.path = probe_path(&out.path, round);
            }
            out
        })
        .collect();
    EncodeRequest {
        outputs,
        stills: if round == 0 {
            req.stills.clone()
        } else {
            Vec::new()
        },
        ..req.clone()
    }
}

/// Where a rendition's probe of `round` is written: beside its output.
fn probe_path(output: &Path, round: u32) -> PathBuf {
    let mut name = output.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".probe{round}"));
    output.with_file_name(name)
}

/// Moves the kept probe's file to the rendition's output path, removes the others, and
/// returns its result with the search's account.
fn keep(s: Searching, output: &Path) -> Result<RenditionResult, MediaError> {
    let k = s.kept.unwrap_or(s.probes.len().saturating_sub(1));
    let probes: Vec<Probe> = s.probes.iter().map(|p| p.0).collect();
    let mut kept = None;
    for (i, (probe, file, result)) in s.probes.into_iter().enumerate() {
        if i == k {
            std::fs::rename(&file, output).map_err(|e| MediaError::write(output, e))?;
            kept = Some((probe, result));
        } else {
            let _ = std::fs::remove_file(&file);
        }
    }
    let (probe, mut result) =
        kept.ok_or_else(|| MediaError::InvalidRequest("a target search ran no probe".into()))?;
    result.target = Some(TargetResult {
        target: s.search.target,
        rate_factor: probe.rate_factor,
        vmaf: probe.vmaf,
        probes,
    });
    Ok(result)
}
