//! The `package` output of a job: what the user asks for, checked before anything runs.
//!
//! Why its own type: the same spec arrives through the HTTP API, a bucket-watch profile and
//! `tessera transcode --hls/--dash/--cmaf`; one parser and one set of rules keeps the three
//! in agreement, and every refusal names the field and the reason.

pub mod thumbnails;

use serde::{Deserialize, Serialize};

use crate::encode::{ApiTarget, RateControl, VideoCodec};

/// The manifest flavour of a package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PackageFormat {
    /// HLS: a master playlist over media playlists (fMP4 or MPEG-TS segments).
    Hls,
    /// MPEG-DASH: one MPD with SegmentTemplate/SegmentTimeline over fMP4 segments.
    Dash,
    /// CMAF: one set of fMP4 segments with both an HLS master playlist and a DASH MPD.
    Cmaf,
}

impl PackageFormat {
    /// Whether the package has HLS playlists.
    pub fn has_hls(self) -> bool {
        matches!(self, PackageFormat::Hls | PackageFormat::Cmaf)
    }

    /// Whether the package has a DASH manifest.
    pub fn has_dash(self) -> bool {
        matches!(self, PackageFormat::Dash | PackageFormat::Cmaf)
    }
}

/// The container of the media segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentType {
    /// Fragmented MP4 (CMAF): an init segment and `.m4s` media segments.
    #[default]
    Fmp4,
    /// MPEG-TS `.ts` segments, for HLS version 3 players (HLS only).
    Ts,
}

/// One rung of an explicit ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rung {
    /// Output height (the width keeps the source's aspect ratio).
    pub height: u32,
    /// Average bit rate in bits/s (give this or `crf`).
    #[serde(default)]
    pub bitrate: Option<u64>,
    /// Constant quality (give this or `bitrate`); with `maxrate`, capped CRF. Rounded to
    /// `f32` away from zero, as an output's, so a number just past the range stays past it.
    #[serde(default, deserialize_with = "crate::api::crf_away_from_zero")]
    pub crf: Option<f32>,
    /// Video codec; H.264 when absent.
    #[serde(default)]
    pub codec: Option<VideoCodec>,
    /// Peak bit rate cap in bits/s (VBV maximum rate; buffer = 2 x maxrate).
    #[serde(default)]
    pub maxrate: Option<u64>,
    /// Encoder profile ("high", "main", "baseline" for H.264; "main", "main10" for HEVC).
    #[serde(default)]
    pub profile: Option<String>,
    /// Target quality of this rung: each segment searches its CRF for this VMAF at the
    /// rung's own size (a `crf` given too is the first probe; no `bitrate`; `maxrate` caps
    /// it). The package's `target` when absent, unless the rung gives a bitrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ApiTarget>,
}

impl Rung {
    /// The target this rung searches for: its own, else the package's unless it gives a
    /// bitrate (a bitrate rung stays one).
    pub fn target_with(&self, package: Option<ApiTarget>) -> Option<ApiTarget> {
        self.target.or(package.filter(|_| self.bitrate.is_none()))
    }
}

/// The video renditions: derived from the source, or listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Ladder {
    /// `"auto"`: rungs derived from the source's size and frame rate (see `ladder`).
    Auto(AutoWord),
    /// The rungs, highest first.
    Rungs(Vec<Rung>),
}

/// The word `"auto"` (so `ladder: "auto"` parses and any other word is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoWord {
    /// Derive the rungs.
    Auto,
}

impl Default for Ladder {
    fn default() -> Self {
        Ladder::Auto(AutoWord::Auto)
    }
}

/// One audio rendition setting (applied to every kept source language).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioRung {
    /// Codec: "aac" (the one every HLS/DASH player decodes).
    #[serde(default = "aac")]
    pub codec: String,
    /// Bit rate in bits/s.
    #[serde(default = "audio_bitrate")]
    pub bitrate: u64,
}

fn aac() -> String {
    "aac".into()
}

fn audio_bitrate() -> u64 {
    128_000
}

/// What a package does with the source's text subtitle tracks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubtitleFormat {
    /// WebVTT renditions (EXT-X-MEDIA TYPE=SUBTITLES; a text/vtt AdaptationSet in DASH): the
    /// default, as a file output keeps its text tracks.
    #[default]
    Webvtt,
    /// None: the text tracks are left out of the package, each named in a warning.
    None,
}

impl SubtitleFormat {
    /// Whether the package carries the source's text tracks.
    pub fn carries(self) -> bool {
        self == SubtitleFormat::Webvtt
    }
}

/// `subtitles` as written: absent is the default (WebVTT); `null` is `"none"`.
///
/// Why `null` is "none": before WebVTT became the default the field was optional and a
/// stored spec without subtitles reads `"subtitles": null` (a dispatcher's job database
/// keeps its jobs' specs so): such a job resumes as it was asked for.
fn subtitles_or_null<'de, D>(d: D) -> Result<SubtitleFormat, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Option::<SubtitleFormat>::deserialize(d)?.unwrap_or(SubtitleFormat::None))
}

/// A package output as the user writes it (`{"package": {...}, "destination": ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageSpec {
    /// HLS, DASH or CMAF.
    pub format: PackageFormat,
    /// fMP4 (default) or MPEG-TS segments (HLS only).
    #[serde(default)]
    pub segment_type: SegmentType,
    /// Target media segment length in seconds; every rendition has an IDR at each boundary.
    #[serde(default = "segment_seconds")]
    pub segment_seconds: f64,
    /// `"auto"` or the rungs.
    #[serde(default)]
    pub ladder: Ladder,
    /// Audio settings; AAC 128 kb/s when absent.
    #[serde(default)]
    pub audio: Vec<AudioRung>,
    /// Text subtitle tracks of the source as WebVTT renditions (EXT-X-MEDIA TYPE=SUBTITLES,
    /// a text/vtt AdaptationSet), the default; `"none"` leaves them out with a warning.
    #[serde(default, deserialize_with = "subtitles_or_null")]
    pub subtitles: SubtitleFormat,
    /// Poster, thumbnails every N seconds, sprite sheets with a WebVTT thumbnails track.
    #[serde(default)]
    pub thumbnails: Option<thumbnails::ThumbnailSpec>,
    /// Target quality of every rung that gives neither its own target nor a bitrate; on the
    /// `"auto"` ladder every rung then searches a CRF under its peak cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ApiTarget>,
}

fn segment_seconds() -> f64 {
    6.0
}

/// The most rungs a ladder may have (each costs an encoder per farm segment).
pub const MAX_RUNGS: usize = 8;

impl PackageSpec {
    /// A spec of `format` with every default.
    pub fn new(format: PackageFormat) -> Self {
        PackageSpec {
            format,
            segment_type: SegmentType::Fmp4,
            segment_seconds: segment_seconds(),
            ladder: Ladder::default(),
            audio: Vec::new(),
            subtitles: SubtitleFormat::Webvtt,
            thumbnails: None,
            target: None,
        }
    }

    /// Checks the rules a spec must keep; the message names the field and the reason.
    pub fn check(&self) -> Result<(), String> {
        let s = self.segment_seconds;
        if !(s.is_finite() && (1.0..=60.0).contains(&s)) {
            return Err(format!("segment_seconds {s} must be within 1..=60"));
        }
        if self.segment_type == SegmentType::Ts && self.format != PackageFormat::Hls {
            return Err(
                "segment_type \"ts\" is for format \"hls\" only (DASH and CMAF use fMP4)".into(),
            );
        }
        if let Some(t) = &self.thumbnails {
            t.check().map_err(|e| format!("thumbnails: {e}"))?;
        }
        if let Ladder::Rungs(rungs) = &self.ladder {
            if rungs.is_empty() || rungs.len() > MAX_RUNGS {
                return Err(format!(
                    "ladder needs 1 to {MAX_RUNGS} rungs, got {}",
                    rungs.len()
                ));
            }
            for (i, r) in rungs.iter().enumerate() {
                check_rung(r, self.target).map_err(|e| format!("ladder[{i}]: {e}"))?;
            }
        }
        if let Some(t) = self.target {
            check_rung_target(VideoCodec::H264, None, None, t)
                .map_err(|e| format!("target: {e}"))?;
        }
        match self.audio.as_slice() {
            [] => {}
            [a] => {
                if a.codec != "aac" {
                    return Err(format!(
                        "audio[0]: codec \"{}\": only \"aac\" is offered",
                        a.codec
                    ));
                }
                if !(32_000..=512_000).contains(&a.bitrate) {
                    return Err(format!(
                        "audio[0]: bitrate {} must be within 32000..=512000",
                        a.bitrate
                    ));
                }
            }
            more => {
                return Err(format!(
                    "audio: one setting applies to every language; got {} entries",
                    more.len()
                ))
            }
        }
        Ok(())
    }

    /// Whether a rung searches a target quality (the package's or its own).
    pub fn searches(&self) -> bool {
        match &self.ladder {
            Ladder::Auto(_) => self.target.is_some(),
            Ladder::Rungs(rungs) => rungs.iter().any(|r| r.target_with(self.target).is_some()),
        }
    }

    /// The audio bit rate (bits/s).
    pub fn audio_bitrate(&self) -> u64 {
        self.audio.first().map_or_else(audio_bitrate, |a| a.bitrate)
    }
}

fn check_rung(r: &Rung, package_target: Option<ApiTarget>) -> Result<(), String> {
    if !(2..=16384).contains(&r.height) {
        return Err(format!("height {} must be within 2..=16384", r.height));
    }
    if let (Some(_), Some(_)) = (r.target, r.bitrate) {
        return Err("a target searches the CRF: give no bitrate with it".into());
    }
    let target = r.target_with(package_target);
    if let Some(t) = target {
        let codec = r.codec.unwrap_or(VideoCodec::H264);
        check_rung_target(codec, r.crf, r.maxrate, t).map_err(|e| format!("target: {e}"))?;
    }
    match (r.bitrate, r.crf) {
        (Some(_), Some(_)) => return Err("give bitrate or crf, not both".into()),
        (None, None) if target.is_none() => return Err("give bitrate, crf or target".into()),
        (Some(b), None) if b < 10_000 => {
            return Err(format!("bitrate {b} b/s is too low (minimum 10000)"))
        }
        (Some(b), None) if b > crate::settings::MAX_BITRATE => {
            let max = crate::settings::MAX_BITRATE;
            return Err(format!("bitrate {b} b/s is too high (maximum {max})"));
        }
        (None, Some(c)) => {
            let max = crate::settings::max_crf(r.codec.unwrap_or(VideoCodec::H264));
            if !(0.0..=max).contains(&c) {
                return Err(format!("crf {c} is outside 0..={max}"));
            }
        }
        _ => {}
    }
    if let Some(m) = r
        .maxrate
        .filter(|m| !(10_000..=crate::settings::MAX_BITRATE).contains(m))
    {
        let max = crate::settings::MAX_BITRATE;
        return Err(format!("maxrate {m} b/s must be within 10000..={max}"));
    }
    if let (Some(m), Some(b)) = (r.maxrate, r.bitrate) {
        if m < b {
            return Err(format!("maxrate {m} is below bitrate {b}"));
        }
    }
    check_profile(r)
}

/// A rung's target, checked as an output's is (`settings::check_target`): VMAF in range,
/// bounds in the codec's CRF range and in order.
fn check_rung_target(
    codec: VideoCodec,
    crf: Option<f32>,
    maxrate: Option<u64>,
    target: ApiTarget,
) -> Result<(), String> {
    let spec = crate::encode::RenditionSpec {
        name: "rung".into(),
        codec,
        rate: RateControl::Crf(crf.unwrap_or_else(|| crate::settings::default_crf(codec))),
        preset: crate::settings::default_preset(codec).into(),
        height: None,
        hdr: Default::default(),
        maxrate,
        profile: None,
        target: Some(target.into()),
    };
    crate::settings::check_target(&spec)
}

/// A rung's profile: one its codec has.
fn check_profile(r: &Rung) -> Result<(), String> {
    if let Some(p) = &r.profile {
        let codec = r.codec.unwrap_or(VideoCodec::H264);
        let known: &[&str] = match codec {
            VideoCodec::H264 => &["baseline", "main", "high"],
            VideoCodec::Hevc => &["main", "main10"],
            VideoCodec::Av1 => &["main"],
        };
        if !known.contains(&p.as_str()) {
            return Err(format!(
                "profile \"{p}\" is not one of {known:?} for {codec:?}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
