//! The head of a recording cut in the middle of a GOP: the pictures no decoder can show.
//!
//! Why: every capture of a broadcast or a camera stream begins where the recorder joined,
//! which is rarely a keyframe. The pictures before the first keyframe come before any
//! parameter sets (H.264 and HEVC: "non-existing PPS") or refer to pictures that are not in
//! the file (an open GOP's leading pictures, HEVC's RASL pictures), and FFmpeg's decoders
//! drop them. They are not frames of the source: a plan that counts them expects frames no
//! segment can give (the QC gate then fails the job), and their decode errors are not damage
//! to charge against `source_corrupt`.
//!
//! What decodes is the decoder's word, not a rule about codecs: when a stream does not begin
//! on a clean keyframe, or its first keyframe has leading pictures, the probe decodes the
//! head (up to the first keyframe, its recovery and a reorder window after it) and marks every
//! packet there that gives no picture as discarded, as an edit list's pre-roll is. The
//! output then starts at the first picture that decodes, and the audio keeps its offset from
//! it.

use std::path::Path;

use super::reorder::display_ranks_of_first;
use crate::MediaError;
use tessera_model::probe::PacketEntry;

/// Packets after the first keyframe (decode order) that are judged as its possible leading
/// pictures: well over H.264's and HEVC's deepest reordering (16).
const LEADING_WINDOW: usize = 64;

/// Packets decoded past the judged ones before the decoder is drained, so a picture judged
/// last has every chance to come out in its place.
const DRAIN_MARGIN: usize = 32;

/// Marks the packets at the head of `packets` (decode order) that the decoder shows no picture
/// for as discarded; gives how many it marked. Only a stream that begins off a clean keyframe,
/// or whose first keyframe has leading pictures, is decoded at all.
pub(crate) fn discard_undecodable_head(
    path: &Path,
    video_index: usize,
    packets: &mut [PacketEntry],
) -> Result<usize, MediaError> {
    let Some(judged) = judged_head(packets) else {
        return Ok(0);
    };
    let limit = (judged + DRAIN_MARGIN).min(packets.len());
    let ranks = display_ranks_of_first(path, video_index, packets.len(), limit)?;
    Ok(mark_unshown(packets, &ranks, judged))
}

/// How many packets from the start must be judged by a decode, or `None` when the stream
/// begins on a clean keyframe with no leading pictures (nearly every file: no decode).
fn judged_head(packets: &[PacketEntry]) -> Option<usize> {
    let first = packets.iter().position(|p| p.key || p.recovery.is_some())?;
    let key = &packets[first];
    let window = &packets[first + 1..(first + 1 + LEADING_WINDOW).min(packets.len())];
    let leading = window.iter().any(|p| p.pts < key.pts);
    if first == 0 && key.key && !leading {
        return None;
    }
    let recovery = key.recovery.map_or(0, |r| r as usize);
    Some((first + 1 + recovery + LEADING_WINDOW).min(packets.len()))
}

/// Marks each of the first `judged` packets without a display rank as discarded (those already
/// discarded stay so); gives how many it newly marked. When none of them decoded at all the
/// head is left as it is: that is a stream the decoder cannot read, for the segments' decode to
/// report, not a head to drop.
fn mark_unshown(packets: &mut [PacketEntry], ranks: &[Option<usize>], judged: usize) -> usize {
    let judged = judged.min(packets.len()).min(ranks.len());
    if ranks[..judged].iter().all(Option::is_none) {
        return 0;
    }
    let mut marked = 0;
    for (p, rank) in packets[..judged].iter_mut().zip(ranks) {
        if rank.is_none() && !p.discard {
            p.discard = true;
            marked += 1;
        }
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(pts: i64, key: bool) -> PacketEntry {
        PacketEntry {
            pts,
            dts: pts,
            key,
            discard: false,
            recovery: None,
        }
    }

    #[test]
    fn a_stream_on_a_clean_keyframe_is_not_decoded() {
        // I P B B: the B-frames show after the keyframe.
        let closed = [
            packet(0, true),
            packet(3, false),
            packet(1, false),
            packet(2, false),
        ];
        assert_eq!(judged_head(&closed), None);
    }

    #[test]
    fn a_cut_stream_and_leading_pictures_are_judged() {
        // Cut mid-GOP: the first keyframe is the fourth packet.
        let mut cut: Vec<PacketEntry> = (0..3).map(|i| packet(i, false)).collect();
        cut.extend((3..200).map(|i| packet(i, i % 50 == 3)));
        assert_eq!(judged_head(&cut), Some(3 + 1 + LEADING_WINDOW));
        // An open GOP's I-frame first, with two leading B-frames showing before it.
        let open = [
            packet(2, true),
            packet(0, false),
            packet(1, false),
            packet(5, false),
        ];
        assert_eq!(judged_head(&open), Some(4));
        // No keyframe at all: nothing to judge against.
        assert_eq!(judged_head(&[packet(0, false), packet(1, false)]), None);
    }

    #[test]
    fn only_unshown_packets_of_the_judged_head_are_discarded() {
        let mut packets: Vec<PacketEntry> = (0..6).map(|i| packet(i, i == 2)).collect();
        let ranks = [None, None, Some(0), Some(1), None, None];
        assert_eq!(mark_unshown(&mut packets, &ranks, 4), 2);
        let discarded: Vec<bool> = packets.iter().map(|p| p.discard).collect();
        assert_eq!(discarded, [true, true, false, false, false, false]);
        // A head where nothing decoded is left for the segments to report.
        let mut packets: Vec<PacketEntry> = (0..3).map(|i| packet(i, false)).collect();
        assert_eq!(mark_unshown(&mut packets, &[None, None, None], 3), 0);
        assert!(packets.iter().all(|p| !p.discard));
    }
}
