//! `tessera transcode`'s streaming-package flags: `--hls DIR`, `--dash DIR`, `--cmaf DIR`.
//!
//! Why a file of its own: the package spec is the API's (`{"package": {...}}`), so the
//! flags only pick the format and fill a few fields; `--package-spec FILE` takes the whole
//! JSON object, and the same checks refuse the same mistakes everywhere.

use std::path::PathBuf;

use anyhow::{bail, Context};
use serde::Deserialize;
use tessera_model::package::{Ladder, PackageFormat, PackageSpec, SegmentType, SubtitleFormat};

/// `--package-subtitles`: the package spec's `subtitles` on the command line and in the
/// `[transcode]` table (`package_subtitles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubtitlesArg {
    /// Every text subtitle track of the source as a WebVTT rendition.
    Webvtt,
    /// No subtitle renditions; each text track left out is named in a warning.
    None,
}

impl From<SubtitlesArg> for SubtitleFormat {
    fn from(a: SubtitlesArg) -> Self {
        match a {
            SubtitlesArg::Webvtt => SubtitleFormat::Webvtt,
            SubtitlesArg::None => SubtitleFormat::None,
        }
    }
}

/// The package flags (flattened into `tessera transcode`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PackageArgs {
    /// Write an HLS package (master.m3u8, a playlist and segments per rendition) into this
    /// folder, which must not exist or be empty; the ladder is derived from the source.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["dash", "cmaf"])]
    pub hls: Option<PathBuf>,
    /// Write a DASH package (manifest.mpd over fMP4 segments) into this folder.
    #[arg(long, value_name = "DIR", conflicts_with = "cmaf")]
    pub dash: Option<PathBuf>,
    /// Write a CMAF package (one set of fMP4 segments, master.m3u8 and manifest.mpd).
    #[arg(long, value_name = "DIR")]
    pub cmaf: Option<PathBuf>,
    /// Media segment length of the package in seconds [default: 6].
    #[arg(long, value_name = "SECONDS", env = "TESSERA_PACKAGE_SECONDS")]
    pub package_seconds: Option<f64>,
    /// HLS segments as MPEG-TS instead of fMP4 (HLS version 3 players).
    #[arg(long)]
    pub ts: bool,
    /// The source's text subtitle tracks in the package: WebVTT renditions, or none (each
    /// track left out named in a warning) [default: webvtt].
    #[arg(long, value_name = "WHAT", env = "TESSERA_PACKAGE_SUBTITLES")]
    pub package_subtitles: Option<SubtitlesArg>,
    /// The package spec as the API takes it (`format` is set by --hls/--dash/--cmaf, and
    /// the flags above override its fields), e.g. an explicit ladder.
    #[arg(long, value_name = "FILE")]
    pub package_spec: Option<PathBuf>,
}

impl PackageArgs {
    /// The package asked for, with its folder; `None` without a package flag.
    /// `file_subtitles` is the config file's `package_subtitles`: below the flag (or its
    /// `TESSERA_PACKAGE_SUBTITLES`) and below a `subtitles` field of `--package-spec`.
    /// Without a package, `--package-subtitles` is a setting with nothing to apply to (so
    /// the environment variable may stay set for plain transcodes).
    pub fn resolve(
        &self,
        file_subtitles: Option<SubtitlesArg>,
    ) -> anyhow::Result<Option<(PackageSpec, PathBuf)>> {
        let (format, dir) = match (&self.hls, &self.dash, &self.cmaf) {
            (Some(d), None, None) => (PackageFormat::Hls, d),
            (None, Some(d), None) => (PackageFormat::Dash, d),
            (None, None, Some(d)) => (PackageFormat::Cmaf, d),
            (None, None, None) => {
                if self.package_spec.is_some() || self.ts || self.package_seconds.is_some() {
                    bail!(
                        "--package-spec, --ts and --package-seconds need --hls, --dash or --cmaf"
                    );
                }
                return Ok(None);
            }
            _ => bail!("give one of --hls, --dash, --cmaf"),
        };
        let mut spec_names_subtitles = false;
        let mut spec = match &self.package_spec {
            Some(file) => {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("package spec {}: cannot read", file.display()))?;
                let mut value: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("package spec {}: not JSON", file.display()))?;
                // The flag names the format; a spec file may leave it out.
                if let Some(obj) = value.as_object_mut() {
                    obj.insert("format".into(), serde_json::to_value(format)?);
                    spec_names_subtitles = obj.contains_key("subtitles");
                }
                serde_json::from_value::<PackageSpec>(value)
                    .with_context(|| format!("package spec {}", file.display()))?
            }
            None => PackageSpec::new(format),
        };
        if let Some(s) = self.package_seconds {
            spec.segment_seconds = s;
        }
        if self.ts {
            spec.segment_type = SegmentType::Ts;
        }
        let file_subtitles = file_subtitles.filter(|_| !spec_names_subtitles);
        if let Some(s) = self.package_subtitles.or(file_subtitles) {
            spec.subtitles = s.into();
        }
        spec.check().map_err(|e| anyhow::anyhow!("package: {e}"))?;
        if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
            bail!(
                "{}: the package folder exists and is not empty",
                dir.display()
            );
        }
        match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() && !p.is_dir() => {
                bail!("{}: the folder's parent does not exist", dir.display())
            }
            _ => {}
        }
        if matches!(spec.ladder, Ladder::Rungs(ref r) if r.is_empty()) {
            bail!("package: the ladder is empty");
        }
        Ok(Some((spec, dir.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_make_the_spec_and_refuse_with_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("pkg");
        let a = PackageArgs {
            cmaf: Some(out.clone()),
            package_seconds: Some(4.0),
            ..Default::default()
        };
        let (spec, d) = a.resolve(None).unwrap().unwrap();
        assert_eq!(
            (spec.format, spec.segment_seconds, d),
            (PackageFormat::Cmaf, 4.0, out.clone())
        );
        let ts = PackageArgs {
            dash: Some(out.clone()),
            ts: true,
            ..Default::default()
        };
        assert!(ts
            .resolve(None)
            .unwrap_err()
            .to_string()
            .contains("segment_type \"ts\""));
        let file = dir.path().join("spec.json");
        std::fs::write(
            &file,
            r#"{"ladder": [{"height": 360, "crf": 26}], "segment_seconds": 2}"#,
        )
        .unwrap();
        let s = PackageArgs {
            hls: Some(out.clone()),
            package_spec: Some(file.clone()),
            ..Default::default()
        };
        let (spec, _) = s.resolve(None).unwrap().unwrap();
        assert_eq!(
            (spec.format, spec.segment_seconds),
            (PackageFormat::Hls, 2.0)
        );
        assert!(matches!(spec.ladder, Ladder::Rungs(ref r) if r.len() == 1));
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("x"), b"x").unwrap();
        let full = PackageArgs {
            hls: Some(out.clone()),
            ..Default::default()
        };
        assert!(full
            .resolve(None)
            .unwrap_err()
            .to_string()
            .contains("not empty"));
        assert!(PackageArgs {
            ts: true,
            ..Default::default()
        }
        .resolve(None)
        .is_err());
        assert!(PackageArgs::default().resolve(None).unwrap().is_none());
    }

    #[test]
    fn subtitles_layer_file_then_spec_then_flag() {
        let dir = tempfile::tempdir().unwrap();
        let hls = |flag: Option<SubtitlesArg>, spec: Option<PathBuf>| PackageArgs {
            hls: Some(dir.path().join("pkg")),
            package_subtitles: flag,
            package_spec: spec,
            ..Default::default()
        };
        let subtitles = |a: PackageArgs, file: Option<SubtitlesArg>| {
            a.resolve(file).unwrap().unwrap().0.subtitles
        };
        let (off, on) = (Some(SubtitlesArg::None), Some(SubtitlesArg::Webvtt));
        assert_eq!(subtitles(hls(None, None), None), SubtitleFormat::Webvtt);
        assert_eq!(subtitles(hls(None, None), off), SubtitleFormat::None);
        assert_eq!(subtitles(hls(on, None), off), SubtitleFormat::Webvtt);
        assert_eq!(subtitles(hls(off, None), None), SubtitleFormat::None);
        let spec = dir.path().join("spec.json");
        std::fs::write(&spec, r#"{"subtitles": "webvtt"}"#).unwrap();
        assert_eq!(
            subtitles(hls(None, Some(spec.clone())), off),
            SubtitleFormat::Webvtt
        );
        assert_eq!(
            subtitles(hls(off, Some(spec.clone())), None),
            SubtitleFormat::None
        );
        // A setting with no package to apply to is not an error.
        let plain = PackageArgs {
            package_subtitles: off,
            ..Default::default()
        };
        assert!(plain.resolve(off).unwrap().is_none());
    }
}
