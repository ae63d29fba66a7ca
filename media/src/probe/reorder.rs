//! Presentation timestamps for containers that store none: AVI (decode timestamps only) and
//! MXF without temporal offsets (its demuxer repeats the dts as pts), when the codec reorders
//! pictures (B-frames in H.264, HEVC, MPEG-2, MPEG-4 Part 2).
//!
//! Why: the whole pipeline keys frames by pts (the plan's ranges, the chunk timestamps, the
//! QC gate). With pts equal to dts the frames of a B-frame stream are keyed in decode order,
//! so segments hold the wrong pictures and the stitched timestamps go backwards. The decoder
//! is the one authority on the display order: the probe feeds it every packet stamped with
//! its decode index and reads back the order of the frames that come out. The displayed
//! frame of rank `r` then takes the time slot of packet `r + depth` (the reorder depth), as
//! FFmpeg's own best-effort timestamps do, so pts never precede dts and A/V sync matches
//! what players show. Only such files pay for the decode.

use std::path::Path;

use ffmpeg_next as ff;

use crate::demux::{open_input, open_video_decoder, read_packet};
use crate::MediaError;
use tessera_model::timestamps::DerivedPts;

/// Whether the probe must derive pts: the codec reorders pictures (`video_delay`) and the
/// container stored no pts (some missing) or only copies of the dts (none differ).
pub(crate) fn needs_derived_pts(pts_missing: bool, pts_differ: bool, video_delay: i32) -> bool {
    video_delay > 0 && (pts_missing || !pts_differ)
}

/// Decodes the video of `path` and returns, per indexed packet (decode order), the rank of
/// its picture in display order (`None`: the decoder showed no picture for it). `indexed`
/// says which packets of the stream the probe kept (those with a timestamp).
pub(crate) fn display_ranks(
    path: &Path,
    video_index: usize,
    indexed: usize,
) -> Result<Vec<Option<usize>>, MediaError> {
    display_ranks_of_first(path, video_index, indexed, usize::MAX)
}

/// [`display_ranks`] of the first `limit` indexed packets only: the decode stops there (the
/// probe's check of a stream's head, head.rs); later packets get no rank.
pub(crate) fn display_ranks_of_first(
    path: &Path,
    video_index: usize,
    indexed: usize,
    limit: usize,
) -> Result<Vec<Option<usize>>, MediaError> {
    let mut ictx = open_input(path)?;
    let stream = ictx
        .stream(video_index)
        .ok_or_else(|| MediaError::invalid(path, "video stream vanished"))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut decoder = open_video_decoder(&stream, path, threads)?;
    let mut ranks = vec![None; indexed];
    let mut shown = 0usize;
    let mut frame = ff::frame::Video::empty();
    let mut take = |frame: &ff::frame::Video, ranks: &mut Vec<Option<usize>>| {
        let slot = frame
            .pts()
            .and_then(|p| usize::try_from(p).ok())
            .and_then(|i| ranks.get_mut(i));
        if let Some(slot) = slot.filter(|s| s.is_none()) {
            *slot = Some(shown);
            shown += 1;
        }
    };
    let mut seq = 0usize;
    while let Some(mut packet) = read_packet(&mut ictx, path)? {
        if packet.stream() != video_index {
            continue;
        }
        if seq >= limit {
            break;
        }
        packet.set_pts(Some(seq as i64));
        packet.set_dts(Some(seq as i64));
        seq += 1;
        // A packet the decoder refuses shows nothing; the rest still has its order.
        let _ = decoder.send_packet(&packet);
        while decoder.receive_frame(&mut frame).is_ok() {
            take(&frame, &mut ranks);
        }
    }
    let _ = decoder.send_eof();
    while decoder.receive_frame(&mut frame).is_ok() {
        take(&frame, &mut ranks);
    }
    Ok(ranks)
}

/// Presentation timestamps from decode timestamps and display ranks: the picture of rank `r`
/// takes the slot of packet `r + depth`, `depth` being the largest distance a packet is
/// decoded ahead of its display place; past the last packet the slots go on at the smallest
/// step. Packets without a rank keep their dts and are listed as hidden.
pub(crate) fn derive_pts(dts: &[i64], ranks: &[Option<usize>]) -> DerivedPts {
    let depth = ranks
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.map(|r| i as i64 - r as i64))
        .max()
        .unwrap_or(0)
        .max(0) as usize;
    let step = tessera_model::timestamps::smallest_step(dts);
    let slot = |k: usize| match dts.get(k) {
        Some(&t) => t,
        None => dts.last().copied().unwrap_or(0) + (k + 1 - dts.len()) as i64 * step,
    };
    let mut hidden = Vec::new();
    let pts = ranks
        .iter()
        .zip(dts)
        .enumerate()
        .map(|(i, (r, &d))| match r {
            Some(r) => slot(r + depth),
            None => {
                hidden.push(i as u32);
                d
            }
        })
        .collect();
    DerivedPts { pts, hidden }
}

/// Presentation times for the packets at `untimed` (those the index counts without a time of
/// their own, scan.rs), the other packets keeping the container's: each untimed picture goes
/// between the pictures shown just before and after it (`ranks`, the decoder's display order),
/// at the midpoint when both are timed, else a frame step (the smallest pts step) from the
/// one that is. A packet the decoder showed nothing for is discarded; gives how many were.
///
/// Why not [`derive_pts`] for all: the container's times are right where it gives them, and
/// the slot rule assumes a stream whose every picture shows from its start, which a recording
/// cut mid-GOP is not.
pub(crate) fn place_untimed(
    packets: &mut [tessera_model::probe::PacketEntry],
    untimed: &[usize],
    ranks: &[Option<usize>],
) -> usize {
    let timed: std::collections::HashSet<usize> = (0..packets.len())
        .filter(|i| untimed.binary_search(i).is_err())
        .collect();
    // Display rank -> pts of the timed pictures.
    let mut by_rank = std::collections::BTreeMap::new();
    for (i, r) in ranks.iter().enumerate() {
        if let (Some(r), true) = (r, timed.contains(&i)) {
            by_rank.insert(*r, packets[i].pts);
        }
    }
    let timed_pts: Vec<i64> = by_rank.values().copied().collect();
    let step = {
        let mut sorted = timed_pts.clone();
        sorted.sort_unstable();
        tessera_model::timestamps::smallest_step(&sorted)
    };
    let mut discarded = 0;
    for &i in untimed {
        let Some(rank) = ranks.get(i).copied().flatten() else {
            packets[i].discard = true;
            discarded += 1;
            continue;
        };
        let before = by_rank.range(..rank).next_back().map(|(_, &p)| p);
        let after = by_rank.range(rank + 1..).next().map(|(_, &p)| p);
        packets[i].pts = match (before, after) {
            (Some(b), Some(a)) => b + (a - b) / 2,
            (Some(b), None) => b + step,
            (None, Some(a)) => a - step,
            (None, None) => packets[i].dts,
        };
    }
    discarded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(pts: i64) -> tessera_model::probe::PacketEntry {
        tessera_model::probe::PacketEntry {
            pts,
            dts: pts,
            key: false,
            discard: false,
            recovery: None,
        }
    }

    #[test]
    fn an_untimed_picture_goes_between_its_display_neighbours() {
        // Decode order I0 P4 B2 b1 b3 (40 ms frames); b1 came without a time (filled with its
        // dts, 120), and a last packet the decoder showed nothing for.
        let mut p: Vec<_> = [0, 160, 80, 120, 120, 200]
            .into_iter()
            .map(packet)
            .collect();
        let ranks = [Some(0), Some(4), Some(2), Some(1), Some(3), None];
        assert_eq!(place_untimed(&mut p, &[3, 5], &ranks), 1);
        assert_eq!(p[3].pts, 40, "between ranks 0 (0) and 2 (80)");
        assert!(p[5].discard);
        assert_eq!([p[0].pts, p[1].pts, p[2].pts, p[4].pts], [0, 160, 80, 120]);
        // The last picture shown: a step after the one before it.
        let mut q: Vec<_> = [0, 40, 0].into_iter().map(packet).collect();
        place_untimed(&mut q, &[2], &[Some(0), Some(1), Some(2)]);
        assert_eq!(q[2].pts, 80);
    }

    #[test]
    fn b_pyramid_order_becomes_presentation_times() {
        // Decode order I0 P4 B2 b1 b3 | I5: display ranks 0 4 2 1 3 5, depth 2.
        let dts: Vec<i64> = (0..6).collect();
        let ranks = [0, 4, 2, 1, 3, 5].map(Some);
        let d = derive_pts(&dts, &ranks);
        assert_eq!(d.pts, vec![2, 6, 4, 3, 5, 7]);
        assert!(d.hidden.is_empty());
        // Never before its own dts, and shown in display order.
        assert!(d.pts.iter().zip(&dts).all(|(p, d)| p >= d));
        let mut by_rank: Vec<(usize, i64)> = ranks.iter().map(|r| r.unwrap()).zip(d.pts).collect();
        by_rank.sort_unstable();
        assert!(by_rank.windows(2).all(|w| w[0].1 < w[1].1));
    }

    #[test]
    fn no_reordering_keeps_the_dts_and_hidden_packets_are_listed() {
        let dts = [0, 40, 80, 120];
        let d = derive_pts(&dts, &[Some(0), Some(1), None, Some(2)]);
        // Depth 1 (the last packet shows one place early): each rank takes the next slot.
        assert_eq!(d.pts, vec![40, 80, 80, 120]);
        assert_eq!(d.hidden, vec![2]);
        let d = derive_pts(&dts, &[Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(d.pts, dts.to_vec());
    }

    #[test]
    fn slots_past_the_end_continue_at_the_step() {
        // Two packets, shown in reverse: depth 1, the last slot lies past the end.
        let d = derive_pts(&[10, 20], &[Some(1), Some(0)]);
        assert_eq!(d.pts, vec![30, 20]);
    }

    #[test]
    fn the_list_survives_the_compact_form() {
        let d = DerivedPts {
            pts: vec![2, 6, 4, 3, 5, -7, i64::MAX / 2],
            hidden: vec![3],
        };
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<DerivedPts>(&text).unwrap(), d);
    }
}
