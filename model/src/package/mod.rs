//! The `package` output of a job: what the user asks for, checked before anything runs.
//!
//! Why its own type: the same spec arrives through the HTTP API, a bucket-watch profile and
//! `tessera transcode --hls/--dash/--cmaf`; one parser and one set of rules keeps the three
//! in agreement, and every refusal names the field and the reason.

pub mod thumbnails;

use serde::{Deserialize, Serialize};

use crate::encode::VideoCodec;

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
                check_rung(r).map_err(|e| format!("ladder[{i}]: {e}"))?;
            }
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

    /// The audio bit rate (bits/s).
    pub fn audio_bitrate(&self) -> u64 {
        self.audio.first().map_or_else(audio_bitrate, |a| a.bitrate)
    }
}

fn check_rung(r: &Rung) -> Result<(), String> {
    if !(2..=16384).contains(&r.height) {
        return Err(format!("height {} must be within 2..=16384", r.height));
    }
    match (r.bitrate, r.crf) {
        (Some(_), Some(_)) => return Err("give bitrate or crf, not both".into()),
        (None, None) => return Err("give bitrate or crf".into()),
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
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> Result<PackageSpec, String> {
        let spec: PackageSpec = serde_json::from_value(v).map_err(|e| e.to_string())?;
        spec.check().map(|()| spec)
    }

    #[test]
    fn defaults_and_the_auto_word() {
        let s = parse(serde_json::json!({"format": "cmaf"})).unwrap();
        assert_eq!(s.segment_seconds, 6.0);
        assert_eq!(s.ladder, Ladder::Auto(AutoWord::Auto));
        assert_eq!(s.segment_type, SegmentType::Fmp4);
        assert_eq!(s.audio_bitrate(), 128_000);
        assert_eq!(s.subtitles, SubtitleFormat::Webvtt);
        assert_eq!(s, PackageSpec::new(PackageFormat::Cmaf));
        assert!(s.format.has_hls() && s.format.has_dash());
        let s = parse(serde_json::json!({"format": "hls", "ladder": "auto", "segment_type": "ts"}))
            .unwrap();
        assert_eq!(s.segment_type, SegmentType::Ts);
        assert!(parse(serde_json::json!({"format": "hls", "ladder": "automatic"})).is_err());
    }

    #[test]
    fn subtitles_are_webvtt_unless_turned_off() {
        let with = |v: serde_json::Value| {
            parse(serde_json::json!({"format": "hls", "subtitles": v}))
                .unwrap()
                .subtitles
        };
        assert_eq!(with("webvtt".into()), SubtitleFormat::Webvtt);
        assert_eq!(with("none".into()), SubtitleFormat::None);
        // A spec stored when the field was optional and absent.
        assert_eq!(with(serde_json::Value::Null), SubtitleFormat::None);
        assert!(SubtitleFormat::default().carries() && !SubtitleFormat::None.carries());
        let stored = serde_json::to_value(PackageSpec::new(PackageFormat::Dash)).unwrap();
        assert_eq!(stored["subtitles"], "webvtt");
    }

    #[test]
    fn rungs_are_checked_and_named() {
        let s = parse(serde_json::json!({"format": "dash", "ladder": [
            {"height": 720, "bitrate": 3000000, "maxrate": 3300000, "profile": "high"},
            {"height": 360, "crf": 24, "codec": "hevc", "profile": "main"}]}))
        .unwrap();
        let Ladder::Rungs(r) = &s.ladder else {
            panic!("rungs")
        };
        assert_eq!(r[1].codec, Some(VideoCodec::Hevc));
        for (body, says) in [
            (
                serde_json::json!([{"height": 720}]),
                "ladder[0]: give bitrate or crf",
            ),
            (
                serde_json::json!([{"height": 720, "crf": 20}, {"height": 1, "crf": 20}]),
                "ladder[1]: height 1",
            ),
            (
                serde_json::json!([{"height": 720, "bitrate": 2000000, "maxrate": 1000000}]),
                "below bitrate",
            ),
            (
                serde_json::json!([{"height": 720, "crf": 20, "profile": "main10"}]),
                "profile \"main10\"",
            ),
            (serde_json::json!([]), "1 to 8 rungs"),
        ] {
            let err = parse(serde_json::json!({"format": "hls", "ladder": body})).unwrap_err();
            assert!(err.contains(says), "{err} lacks {says}");
        }
    }

    #[test]
    fn refusals_name_the_field() {
        for (body, says) in [
            (
                serde_json::json!({"format": "dash", "segment_type": "ts"}),
                "segment_type \"ts\"",
            ),
            (
                serde_json::json!({"format": "hls", "segment_seconds": 0.5}),
                "segment_seconds 0.5",
            ),
            (
                serde_json::json!({"format": "hls", "thumbnails": {"interval": 10}}),
                "thumbnails: interval needs heights",
            ),
            (
                serde_json::json!({"format": "hls", "subtitles": "srt"}),
                "unknown variant",
            ),
            (
                serde_json::json!({"format": "hls", "audio": [{"codec": "opus"}]}),
                "audio[0]: codec",
            ),
            (
                serde_json::json!({"format": "hls", "audio": [{}, {}]}),
                "2 entries",
            ),
            (serde_json::json!({"format": "smooth"}), "unknown variant"),
            (
                serde_json::json!({"format": "hls", "segment_secs": 4}),
                "unknown field",
            ),
        ] {
            let err = parse(body).unwrap_err();
            assert!(err.contains(says), "{err} lacks {says}");
        }
    }
}
