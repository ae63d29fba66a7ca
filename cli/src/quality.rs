//! `tessera quality SOURCE OUTPUT [--json]`: how close an encoded file is to its source (PSNR
//! over the three planes and of luma, SSIM of luma, frames compared and the difference in
//! frame count), measured as `tessera transcode --quality` measures its outputs.
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
    };
    let (q, _): (QualityReport, _) = sandbox.run(&op, limits, &mut |_| {}).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&q)?);
    } else {
        println!(
            "{}: PSNR {:.2} dB (luma {:.2} dB), SSIM {:.4}, {} frames compared, {} frames \
             more in the source",
            args.output.display(),
            q.psnr,
            q.psnr_y,
            q.ssim,
            q.frames,
            q.frame_count_difference
        );
    }
    Ok(())
}
