//! `tessera quality SOURCE OUTPUT [--json]`: how close an encoded file is to its source (PSNR
//! over the three planes and of luma, SSIM of luma, VMAF pooled five ways, frames compared and
//! the difference in frame count), measured as `tessera transcode --quality` measures its
//! outputs.
//!
//! Why: an operator checks an output made elsewhere (another encoder, a GPU farm, a file a
//! user says looks wrong) against its source with the same measure the farm reports, and the
//! GPU smoke test checks that its PSNR floor catches a garbled file. Both files are opened in
//! a sandboxed child, like every other look at a file.

use std::path::PathBuf;
use std::time::Duration;

use tessera_farm::sandbox::{Confinement, Limits, MediaOp, Sandbox};
use tessera_model::stitch::QualityReport;

/// `tessera quality` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct QualityArgs {
    /// The source the output was made from.
    pub source: PathBuf,
    /// The encoded file (scaled back to the source's size when smaller).
    pub output: PathBuf,
    /// Frames of each segment, in order (e.g. a report's `segment_frames`, comma-separated):
    /// VMAF is pooled per segment too. They must add up to the output's frames.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    pub segments: Vec<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tessera quality`; fails with the child's error (naming the file and the reason).
pub async fn run(args: &QualityArgs) -> anyhow::Result<()> {
    let confinement = Confinement::default()
        .reading(&args.source)
        .reading(&args.output);
    let sandbox = Sandbox::current()?.confined(confinement);
    let limits = Limits {
        timeout: Duration::from_secs(3600),
        ..Limits::default()
    };
    let op = MediaOp::Quality {
        output: args.output.clone(),
        source: args.source.clone(),
        segments: args.segments.clone(),
    };
    let (q, _): (QualityReport, _) = sandbox.run(&op, limits, &mut |_| {}).await?;
    let given: u64 = args.segments.iter().sum();
    if !args.segments.is_empty() && given != q.frames {
        anyhow::bail!(
            "--segments: {} segments of {given} frames in all, but {} has {} frames compared",
            args.segments.len(),
            args.output.display(),
            q.frames
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&q)?);
    } else {
        println!(
            "{}: PSNR {:.2} dB (luma {:.2} dB), SSIM {:.4}{}, {} frames compared, {} frames \
             more in the source",
            args.output.display(),
            q.psnr,
            q.psnr_y,
            q.ssim,
            vmaf_text(&q),
            q.frames,
            q.frame_count_difference
        );
        for (i, seg) in q.vmaf.iter().flat_map(|v| v.segments.iter()).enumerate() {
            println!(
                "segment {i}: VMAF {:.2} (harmonic {:.2}, worst frame {:.2}), {} frames",
                seg.mean, seg.harmonic_mean, seg.min, seg.frames
            );
        }
    }
    Ok(())
}

/// The figures of a transcode's summary line: ", PSNR .. dB, SSIM .., VMAF .. (..)".
pub(crate) fn summary(q: &QualityReport) -> String {
    format!(
        ", PSNR {:.2} dB, SSIM {:.4}{}",
        q.psnr,
        q.ssim,
        vmaf_text(q)
    )
}

/// ", VMAF mean (harmonic mean, 1st percentile, worst frame; model)", or nothing.
fn vmaf_text(q: &QualityReport) -> String {
    q.vmaf.as_ref().map_or_else(String::new, |v| {
        let p = &v.pooled;
        format!(
            ", VMAF {:.2} (harmonic {:.2}, 1st percentile {:.2}, worst frame {:.2}; {} at {}x{})",
            p.mean, p.harmonic_mean, p.p1, p.min, v.model, v.width, v.height
        )
    })
}
