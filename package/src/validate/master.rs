//! Checks of an HLS package from its master playlist: the attributes of every variant and
//! rendition, declared against measured bandwidth, and segment alignment across renditions.
//!
//! Why apart from `media`: these rules compare renditions with each other and with what the
//! master declares; `media` measures one rendition at a time and feeds them.

use super::media::{check_media, read_playlist, MediaFacts};
use super::ReadFn;
use crate::hls::{dir_of, resolve, Playlist, Tag, Variant};
use std::collections::HashMap;

/// One rendition: its playlist's path with what its check measured.
type Rendition = (String, Option<MediaFacts>);

/// Renditions by (TYPE, GROUP-ID).
type Groups = HashMap<(String, String), Vec<Rendition>>;

/// Checks that attribute `name` of `tag` is present and of the RFC 8216 type `kind`.
fn check_attr(
    tag: &Tag,
    name: &str,
    kind: &str,
    at: &str,
    problems: &mut Vec<String>,
) -> Option<String> {
    let Some(a) = tag.attribute(name) else {
        problems.push(format!("{at}: {} has no {name}", tag.name));
        return None;
    };
    let ok = match kind {
        "integer" => {
            !a.quoted && !a.value.is_empty() && a.value.bytes().all(|b| b.is_ascii_digit())
        }
        "decimal" => {
            !a.quoted
                && a.value
                    .parse::<f64>()
                    .is_ok_and(|v| v.is_finite() && v >= 0.0)
        }
        "resolution" => !a.quoted && resolution(&a.value).is_some(),
        _ => a.quoted,
    };
    if !ok {
        problems.push(format!(
            "{at}: {name}={:?} of {} is not a {kind} value (RFC 8216 4.2)",
            a.value, tag.name
        ));
        return None;
    }
    Some(a.value.clone())
}

fn resolution(v: &str) -> Option<(u32, u32)> {
    let (w, h) = v.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

/// Checks an HLS package from its master playlist (`master`, root-relative). With
/// `expected_codecs` (MPEG-TS packages, whose segments carry no codec string), every CODECS
/// entry must be one of them. Returns every problem found; empty means valid.
pub fn validate_hls(
    master: &str,
    read: ReadFn<'_>,
    expected_codecs: Option<&[String]>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(pl) = read_playlist(master, read, &mut problems, "the package") else {
        return problems;
    };
    if pl.tag("EXT-X-INDEPENDENT-SEGMENTS").is_none() {
        problems.push(format!("{master}: no EXT-X-INDEPENDENT-SEGMENTS"));
    }
    if pl.variants.is_empty() {
        problems.push(format!("{master}: no EXT-X-STREAM-INF"));
    }
    let master = Master {
        path: master,
        dir: dir_of(master),
        read,
        expected_codecs,
    };
    let groups = master.check_renditions(&pl, &mut problems);
    let mut aligned: Vec<(String, Vec<f64>)> = Vec::new();
    for v in &pl.variants {
        if let Some(measured) = master.check_variant(v, &groups, &mut problems) {
            aligned.push(measured);
        }
    }
    check_alignment(&aligned, &mut problems);
    for tag in pl.tags_named("EXT-X-I-FRAME-STREAM-INF") {
        master.check_iframe_stream(tag, &mut problems);
    }
    problems
}

/// The master playlist under check: its path (for messages), its folder (URIs resolve
/// against it), how to read files, and the codecs an MPEG-TS package must declare.
struct Master<'a> {
    path: &'a str,
    dir: &'a str,
    read: ReadFn<'a>,
    expected_codecs: Option<&'a [String]>,
}

impl Master<'_> {
    /// Checks every EXT-X-MEDIA and the rendition it names; returns them by group.
    fn check_renditions(&self, pl: &Playlist, problems: &mut Vec<String>) -> Groups {
        let mut groups: Groups = HashMap::new();
        for tag in pl.tags_named("EXT-X-MEDIA") {
            let at = format!("{} line {}", self.path, tag.line);
            let kind = tag.attr("TYPE").unwrap_or_default().to_string();
            let group = check_attr(tag, "GROUP-ID", "quoted", &at, problems).unwrap_or_default();
            check_attr(tag, "NAME", "quoted", &at, problems);
            let Some(uri) = tag.attr("URI") else { continue };
            let path = resolve(self.dir, uri);
            let facts = check_media(&path, self.read, problems, self.path);
            groups.entry((kind, group)).or_default().push((path, facts));
        }
        groups
    }

    /// Checks one EXT-X-STREAM-INF against its media playlist and the audio renditions it
    /// names; returns the playlist's path and EXTINFs for the alignment check.
    fn check_variant(
        &self,
        v: &Variant,
        groups: &Groups,
        problems: &mut Vec<String>,
    ) -> Option<(String, Vec<f64>)> {
        let at = format!("{} line {}", self.path, v.tag.line);
        let bandwidth = check_attr(&v.tag, "BANDWIDTH", "integer", &at, problems);
        let average = check_attr(&v.tag, "AVERAGE-BANDWIDTH", "integer", &at, problems);
        let codecs = check_attr(&v.tag, "CODECS", "quoted", &at, problems).unwrap_or_default();
        let res = check_attr(&v.tag, "RESOLUTION", "resolution", &at, problems);
        check_attr(&v.tag, "FRAME-RATE", "decimal", &at, problems);
        let codecs: Vec<&str> = codecs
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        self.check_expected_codecs(&at, &codecs, problems);
        let audio = linked_audio(v, groups, &at, problems);
        let path = resolve(self.dir, &v.uri);
        let facts = check_media(&path, self.read, problems, self.path)?;
        check_init_codecs(&at, v, &facts, &audio, &codecs, problems);
        if let (Some(init), Some(res)) = (&facts.init, res.as_deref().and_then(resolution)) {
            if init.dimensions.is_some_and(|d| d != res) {
                let (w, h) = init.dimensions.unwrap_or_default();
                problems.push(format!(
                    "{at}: RESOLUTION {}x{} of {} differs from its init segment's {w}x{h}",
                    res.0, res.1, v.uri
                ));
            }
        }
        let audio_facts = audio.iter().filter_map(|(_, f)| f.as_ref());
        let audio_peak = audio_facts.clone().map(|f| f.peak).fold(0.0, f64::max);
        let audio_avg = audio_facts.map(|f| f.average).fold(0.0, f64::max);
        let measured = (facts.peak + audio_peak, facts.average + audio_avg);
        check_bandwidth(&at, &v.uri, (bandwidth, average), measured, problems);
        Some((path, facts.durations))
    }

    /// With expected codecs (MPEG-TS), every CODECS entry must be one of them.
    fn check_expected_codecs(&self, at: &str, codecs: &[&str], problems: &mut Vec<String>) {
        let Some(expected) = self.expected_codecs else {
            return;
        };
        for c in codecs {
            if !expected.iter().any(|e| e == c) {
                problems.push(format!(
                    "{at}: CODECS entry {c:?} is not one of the stream's codecs {expected:?}"
                ));
            }
        }
    }

    /// Checks one EXT-X-I-FRAME-STREAM-INF: its attributes, that its playlist says
    /// EXT-X-I-FRAMES-ONLY, and its BANDWIDTH against the playlist's measured peak.
    fn check_iframe_stream(&self, tag: &Tag, problems: &mut Vec<String>) {
        let at = format!("{} line {}", self.path, tag.line);
        let bandwidth = check_attr(tag, "BANDWIDTH", "integer", &at, problems);
        check_attr(tag, "CODECS", "quoted", &at, problems);
        let Some(uri) = check_attr(tag, "URI", "quoted", &at, problems) else {
            return;
        };
        let path = resolve(self.dir, &uri);
        if let Some(bytes) = (self.read)(&path) {
            if !String::from_utf8_lossy(&bytes).contains("#EXT-X-I-FRAMES-ONLY") {
                problems.push(format!(
                    "{path}: I-frame playlist without EXT-X-I-FRAMES-ONLY"
                ));
            }
        }
        if let Some(facts) = check_media(&path, self.read, problems, self.path) {
            let measured = (facts.peak, facts.average);
            check_bandwidth(&at, &uri, (bandwidth, None), measured, problems);
        }
    }
}

/// The audio renditions a variant's AUDIO group holds; its AUDIO and SUBTITLES must each
/// name an EXT-X-MEDIA group.
fn linked_audio<'g>(
    v: &Variant,
    groups: &'g Groups,
    at: &str,
    problems: &mut Vec<String>,
) -> Vec<&'g Rendition> {
    let mut audio: Vec<&Rendition> = Vec::new();
    for (attr, kind) in [("AUDIO", "AUDIO"), ("SUBTITLES", "SUBTITLES")] {
        let Some(group) = v.tag.attr(attr) else {
            continue;
        };
        check_attr(&v.tag, attr, "quoted", at, problems);
        match groups.get(&(kind.to_string(), group.to_string())) {
            None => problems.push(format!(
                "{at}: {attr}=\"{group}\" names no EXT-X-MEDIA group"
            )),
            Some(members) if kind == "AUDIO" => audio.extend(members),
            Some(_) => {}
        }
    }
    audio
}

/// CODECS must list the codec every init segment of the variant and its audio declares.
fn check_init_codecs(
    at: &str,
    v: &Variant,
    facts: &MediaFacts,
    audio: &[&Rendition],
    codecs: &[&str],
    problems: &mut Vec<String>,
) {
    let inits = facts
        .init
        .iter()
        .chain(audio.iter().filter_map(|(_, f)| f.as_ref()?.init.as_ref()));
    for init in inits {
        match &init.codec {
            Some(c) if !codecs.contains(&c.as_str()) => problems.push(format!(
                "{at}: CODECS {:?} of {} lacks {c:?}, the codec its init segment declares",
                codecs.join(","),
                v.uri
            )),
            _ => {}
        }
    }
}

/// BANDWIDTH must cover the measured peak; AVERAGE-BANDWIDTH must be within 10% of the
/// measured average. The peak is allowed 0.01% + 1 bit/s for EXTINF's 1 us rounding.
fn check_bandwidth(
    at: &str,
    uri: &str,
    (declared, average): (Option<String>, Option<String>),
    (peak, measured_avg): (f64, f64),
    problems: &mut Vec<String>,
) {
    if let Some(d) = declared.and_then(|d| d.parse::<u64>().ok()) {
        if (d as f64) * 1.0001 + 1.0 < peak {
            problems.push(format!(
                "{at}: BANDWIDTH={d} of {uri} is below the measured peak {} bit/s (segment size * 8 / EXTINF, with the largest audio rendition)",
                peak.ceil() as u64
            ));
        }
    }
    if let Some(a) = average.and_then(|a| a.parse::<u64>().ok()) {
        if ((a as f64) - measured_avg).abs() > 0.1 * measured_avg {
            problems.push(format!(
                "{at}: AVERAGE-BANDWIDTH={a} of {uri} is not within 10% of the measured average {} bit/s",
                measured_avg.ceil() as u64
            ));
        }
    }
}

/// All variants must have the same segment count and EXTINFs within 1 ms, so a player can
/// switch at any segment boundary.
fn check_alignment(variants: &[(String, Vec<f64>)], problems: &mut Vec<String>) {
    let Some((first, reference)) = variants.first() else {
        return;
    };
    for (path, durations) in &variants[1..] {
        if durations.len() != reference.len() {
            problems.push(format!(
                "{path}: {} segments but {first} has {} (renditions not aligned)",
                durations.len(),
                reference.len()
            ));
            continue;
        }
        let off = durations
            .iter()
            .zip(reference)
            .position(|(a, b)| (a - b).abs() > 0.001);
        if let Some(i) = off {
            problems.push(format!(
                "{path}: segment {i} lasts {:.6} s but {:.6} s in {first} (renditions not aligned)",
                durations[i], reference[i]
            ));
        }
    }
}
