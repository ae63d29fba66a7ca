//! WebVTT files: a whole-file track (DASH sidecar) and per-segment files (HLS).
//!
//! Why here: subtitle segmentation is pure text over cue times, and HLS needs exactly
//! aligned files with an X-TIMESTAMP-MAP header; keeping it beside the playlists lets one
//! test check both.

use std::fmt::Write as _;

/// One cue on the package timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Cue {
    /// Start in seconds.
    pub start: f64,
    /// End in seconds.
    pub end: f64,
    /// The payload; may span lines.
    pub text: String,
}

/// `HH:MM:SS.mmm`, negative and non-finite times clamped to zero.
pub fn timestamp(seconds: f64) -> String {
    let ms = if seconds.is_finite() && seconds > 0.0 {
        (seconds * 1000.0).round() as u64
    } else {
        0
    };
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Cue text that cannot end the cue early or be read as a timing line: blank lines are
/// dropped and "-->" becomes "--&gt;" (which renders the same).
fn clean(text: &str) -> String {
    text.lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.replace("-->", "--&gt;"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Finite cues in start order (WebVTT requires non-decreasing start times).
fn sorted(cues: &[Cue]) -> Vec<&Cue> {
    let mut out: Vec<&Cue> = cues
        .iter()
        .filter(|c| c.start.is_finite() && c.end.is_finite())
        .collect();
    out.sort_by(|a, b| a.start.total_cmp(&b.start));
    out
}

fn write_cue(out: &mut String, cue: &Cue) {
    let _ = writeln!(out, "{} --> {}", timestamp(cue.start), timestamp(cue.end));
    let text = clean(&cue.text);
    if !text.is_empty() {
        let _ = writeln!(out, "{text}");
    }
    out.push('\n');
}

/// One WebVTT file with every cue.
pub fn whole_file(cues: &[Cue]) -> String {
    let mut out = String::from("WEBVTT\n\n");
    for cue in sorted(cues) {
        write_cue(&mut out, cue);
    }
    out
}

/// One file per media segment; `boundaries` holds the n segment starts and the end. A cue
/// goes in every segment it overlaps (unchanged times); a zero-length cue goes where it starts.
pub fn segment_files(cues: &[Cue], boundaries: &[f64], mpegts_offset: u64) -> Vec<String> {
    let cues = sorted(cues);
    boundaries
        .windows(2)
        .map(|w| {
            let (start, end) = (w[0], w[1]);
            let mut out =
                format!("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:{mpegts_offset},LOCAL:00:00:00.000\n\n");
            for cue in &cues {
                let overlaps = cue.start < end
                    && (cue.end > start || (cue.end == cue.start && cue.start >= start));
                if overlaps {
                    write_cue(&mut out, cue);
                }
            }
            out
        })
        .collect()
}

/// The cue text of an ASS event line as FFmpeg's subtitle decoders write it
/// ("ReadOrder,Layer,Style,Name,MarginL,MarginR,MarginV,Effect,Text"): override blocks
/// (`{\\i1}` ...) dropped except italic and bold, which become `<i>`/`<b>`; `\\N` a line
/// break, `\\h` a space; `&` and `<` escaped for WebVTT.
///
/// Why: every text track (SRT, ASS, mov_text, WebVTT) reaches tessera as these events.
pub fn text_from_ass(event: &str) -> String {
    let text = event.splitn(9, ',').nth(8).unwrap_or(event);
    let mut out = String::with_capacity(text.len());
    let mut open: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '{' {
            if let Some(end) = rest.find('}') {
                for tag in rest[1..end].split('\\').filter(|t| !t.is_empty()) {
                    let (name, on) = match tag {
                        "i1" => ("i", true),
                        "i0" => ("i", false),
                        "b1" => ("b", true),
                        "b0" => ("b", false),
                        _ => continue,
                    };
                    let is_open = open.contains(&name);
                    if on && !is_open {
                        out.push_str(&format!("<{name}>"));
                        open.push(name);
                    } else if !on && is_open {
                        out.push_str(&format!("</{name}>"));
                        open.retain(|n| *n != name);
                    }
                }
                rest = &rest[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest
            .strip_prefix("\\N")
            .or_else(|| rest.strip_prefix("\\n"))
        {
            out.push('\n');
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("\\h") {
            out.push(' ');
            rest = after;
            continue;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            _ => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    for name in open.iter().rev() {
        out.push_str(&format!("</{name}>"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cue(start: f64, end: f64, text: &str) -> Cue {
        Cue {
            start,
            end,
            text: text.into(),
        }
    }

    #[test]
    fn timestamps_are_hh_mm_ss_mmm() {
        assert_eq!(timestamp(0.0), "00:00:00.000");
        assert_eq!(timestamp(3725.4567), "01:02:05.457");
        assert_eq!(timestamp(-1.0), "00:00:00.000");
        assert_eq!(timestamp(f64::NAN), "00:00:00.000");
        assert_eq!(timestamp(360_000.0), "100:00:00.000");
    }

    #[test]
    fn whole_file_sorts_and_cleans_cues() {
        let cues = [
            cue(5.0, 6.5, "second"),
            cue(1.0, 2.0, "a --> b\n\n  \nline two"),
        ];
        assert_eq!(
            whole_file(&cues),
            "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\na --&gt; b\nline two\n\n\
             00:00:05.000 --> 00:00:06.500\nsecond\n\n"
        );
    }

    #[test]
    fn segment_files_repeat_spanning_cues() {
        let cues = [
            cue(1.0, 7.0, "spans"),
            cue(7.0, 8.0, "second only"),
            cue(12.0, 12.0, "instant"),
        ];
        let files = segment_files(&cues, &[0.0, 6.0, 12.0, 14.0], 900_000);
        let head = "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000\n\n";
        assert_eq!(files.len(), 3);
        assert_eq!(
            files[0],
            format!("{head}00:00:01.000 --> 00:00:07.000\nspans\n\n")
        );
        assert_eq!(
            files[1],
            format!("{head}00:00:01.000 --> 00:00:07.000\nspans\n\n00:00:07.000 --> 00:00:08.000\nsecond only\n\n")
        );
        assert_eq!(
            files[2],
            format!("{head}00:00:12.000 --> 00:00:12.000\ninstant\n\n")
        );
    }

    #[test]
    fn ass_events_become_cue_text() {
        assert_eq!(
            text_from_ass("0,0,Default,,0,0,0,,Hello, world"),
            "Hello, world"
        );
        assert_eq!(
            text_from_ass("3,0,Default,,0,0,0,,{\\an8}{\\i1}Top{\\i0}\\Nline\\htwo"),
            "<i>Top</i>\nline two"
        );
        assert_eq!(
            text_from_ass("1,0,Default,,0,0,0,,{\\b1}a < b & c"),
            "<b>a &lt; b &amp; c</b>"
        );
        assert_eq!(text_from_ass("no commas"), "no commas");
    }

    proptest! {
        #[test]
        fn every_cue_lands_in_a_segment_and_no_blank_line_splits_it(
            raw in proptest::collection::vec((0.0f64..100.0, 0.0f64..10.0, "[a-z\n -]{0,12}"), 0..10)
        ) {
            let cues: Vec<Cue> = raw.iter().map(|(s, d, t)| cue(*s, s + d, t)).collect();
            let files = segment_files(&cues, &[0.0, 25.0, 50.0, 75.0, 110.0], 0);
            let count: usize = files.iter().map(|f| f.matches(" --> ").count()).sum();
            prop_assert!(count >= cues.len());
            for f in &files {
                // Every block after the header is one timing line plus non-blank text.
                for block in f.split("\n\n").skip(1).filter(|b| !b.is_empty()) {
                    prop_assert!(block.lines().next().unwrap_or("").contains(" --> "));
                    prop_assert_eq!(block.matches(" --> ").count(), 1);
                }
            }
        }
    }
}
