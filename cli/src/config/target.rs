//! Target quality and the peak-rate cap of `tessera transcode`, layered like every setting:
//! `--target-vmaf` (`TESSERA_TARGET_VMAF`, `target_vmaf` in `[transcode]`), `--min-crf` and
//! `--max-crf` (its search's bounds), `--max-bitrate` (a VBV cap, with a CRF or a target);
//! with `--hls/--dash/--cmaf` the target is the package's too.
//!
//! Why apart from config.rs: the four settings check each other (bounds need a target, a
//! target needs a CRF rate), and the rendition's own check (`settings::check_target`) says the
//! rest.

use anyhow::bail;
use tessera_farm::config::Setting;
use tessera_model::api::ApiTarget;
use tessera_model::encode::{RenditionSpec, TargetQuality};
use tessera_model::package::PackageSpec;
use tessera_model::settings::check_target;

use super::{FileTranscode, TranscodeArgs};
use crate::args::parse_bitrate;

/// Sets `spec`'s target and peak-rate cap from the flags, env and file; refuses bounds
/// without a target, a target with a bitrate, and whatever `check_target` refuses.
pub(super) fn apply(
    spec: &mut RenditionSpec,
    args: &TranscodeArgs,
    file: &FileTranscode,
) -> anyhow::Result<()> {
    let vmaf = Setting::layered("target_vmaf", args.target_vmaf, file.target_vmaf).optional();
    let min = Setting::layered("min_crf", args.min_crf, file.min_crf).optional();
    let max = Setting::layered("max_crf", args.max_crf, file.max_crf).optional();
    let cap = Setting::layered(
        "max_bitrate",
        args.max_bitrate.clone(),
        file.max_bitrate.clone(),
    );
    if let Some(cap) = cap.optional() {
        spec.maxrate = Some(parse_bitrate(&cap)?);
    }
    spec.target = match (vmaf, min.or(max)) {
        (Some(vmaf), _) => Some(TargetQuality {
            vmaf,
            min_rate_factor: min,
            max_rate_factor: max,
        }),
        (None, Some(_)) => bail!("min_crf and max_crf bound a target's search: give a target_vmaf"),
        (None, None) => None,
    };
    check_target(spec).map_err(|e| anyhow::anyhow!(e))?;
    Ok(())
}

/// A package asked for with `--target-vmaf` (and `--min-crf`/`--max-crf`): every rung that
/// has no target of its own in `--package-spec` and gives no bitrate searches the same
/// target (`PackageSpec::target`); a spec file's own package `target` wins.
pub(super) fn apply_to_package(spec: &mut PackageSpec, main: &RenditionSpec) -> anyhow::Result<()> {
    if let (None, Some(t)) = (spec.target, main.target) {
        spec.target = Some(ApiTarget {
            vmaf: t.vmaf,
            min_crf: t.min_rate_factor,
            max_crf: t.max_rate_factor,
        });
        spec.check().map_err(|e| anyhow::anyhow!("package: {e}"))?;
    }
    Ok(())
}
