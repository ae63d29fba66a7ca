//! Reading one track fragment (traf: tfhd, tfdt, trun) of a media segment.
//!
//! Why a module of its own: the sample-table arithmetic (defaults, flags, signed offsets,
//! data offsets) is the fiddly part of `segment_info` and is tested through it.

use super::{find, BmffBox, BmffError, Boxes, Reader};

/// What a media segment's fragments say about its first track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The track the facts are about (the first traf's track_ID).
    pub track_id: u32,
    /// tfdt of the first fragment: the segment's start in decode time.
    pub base_media_decode_time: u64,
    /// Sum of all sample durations of the track in the segment.
    pub duration: u64,
    /// Number of samples of the track in the segment.
    pub sample_count: u64,
    /// Smallest decode time + composition offset over the samples.
    pub earliest_presentation_time: i64,
    /// Byte offset in the file where the first sample's data ends, when sizes are known.
    pub first_sample_end: Option<u64>,
}

/// Reads a media segment (styp, sidx, one or more moof + mdat).
///
/// Only the track of the first traf is counted; its fragments may be several.
pub fn segment_info(bytes: &[u8]) -> Result<SegmentInfo, BmffError> {
    let mut acc: Option<SegmentInfo> = None;
    let mut next_decode = 0u64;
    for top in Boxes::new(bytes) {
        let top = top?;
        if &top.fourcc != b"moof" {
            continue;
        }
        for traf in top.children() {
            let traf = traf?;
            if &traf.fourcc != b"traf" {
                continue;
            }
            let frag = read_traf(&traf, top.offset, next_decode)?;
            let info = acc.get_or_insert(SegmentInfo {
                track_id: frag.track_id,
                base_media_decode_time: frag.start,
                duration: 0,
                sample_count: 0,
                earliest_presentation_time: i64::MAX,
                first_sample_end: frag.first_sample_end,
            });
            if frag.track_id != info.track_id {
                continue;
            }
            info.duration += frag.duration;
            info.sample_count += frag.samples;
            info.earliest_presentation_time = info.earliest_presentation_time.min(frag.earliest);
            next_decode = frag.start + frag.duration;
        }
    }
    let info = acc.ok_or(BmffError::Missing("moof"))?;
    if info.sample_count == 0 {
        return Err(BmffError::Invalid("segment has no samples".into()));
    }
    if let Some(end) = info.first_sample_end {
        if end > bytes.len() as u64 {
            return Err(BmffError::Invalid(format!(
                "first sample ends at byte {end}, past the end of the file ({} bytes)",
                bytes.len()
            )));
        }
    }
    Ok(info)
}

/// The facts of one traf.
pub(super) struct Fragment {
    pub track_id: u32,
    /// Decode time of the first sample (tfdt, or where the previous fragment ended).
    pub start: u64,
    pub duration: u64,
    pub samples: u64,
    pub earliest: i64,
    pub first_sample_end: Option<u64>,
}

struct Tfhd {
    track_id: u32,
    base_data_offset: Option<u64>,
    default_duration: Option<u32>,
    default_size: Option<u32>,
}

fn tfhd(payload: &[u8]) -> Result<Tfhd, BmffError> {
    let mut r = Reader::new(payload, "tfhd");
    let (_, flags) = r.full()?;
    let track_id = r.u32()?;
    let base_data_offset = if flags & 0x01 != 0 {
        Some(r.u64()?)
    } else {
        None
    };
    if flags & 0x02 != 0 {
        r.u32()?;
    }
    let default_duration = if flags & 0x08 != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    let default_size = if flags & 0x10 != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    Ok(Tfhd {
        track_id,
        base_data_offset,
        default_duration,
        default_size,
    })
}

/// Reads a traf whose moof starts at `moof_offset`; `fallback_start` is used without tfdt.
pub(super) fn read_traf(
    traf: &BmffBox<'_>,
    moof_offset: usize,
    fallback_start: u64,
) -> Result<Fragment, BmffError> {
    let header = find(traf.children(), b"tfhd")?.ok_or(BmffError::Missing("tfhd"))?;
    let tfhd = tfhd(header.payload)?;
    let start = match find(traf.children(), b"tfdt")? {
        Some(b) => tfdt(b.payload)?,
        None => fallback_start,
    };
    let base = tfhd.base_data_offset.unwrap_or(moof_offset as u64);
    let mut frag = Fragment {
        track_id: tfhd.track_id,
        start,
        duration: 0,
        samples: 0,
        earliest: i64::MAX,
        first_sample_end: None,
    };
    let mut first_run = true;
    for b in traf.children() {
        let b = b?;
        if &b.fourcc != b"trun" {
            continue;
        }
        read_trun(b.payload, &tfhd, base, first_run, &mut frag)?;
        first_run = false;
    }
    Ok(frag)
}

/// The base media decode time of a tfdt (version 1: 64 bits, else 32).
fn tfdt(payload: &[u8]) -> Result<u64, BmffError> {
    let mut r = Reader::new(payload, "tfdt");
    let (version, _) = r.full()?;
    if version == 1 {
        r.u64()
    } else {
        Ok(u64::from(r.u32()?))
    }
}

/// One sample of a trun: its duration, its size when known, its composition offset.
struct Sample {
    duration: u32,
    size: Option<u32>,
    cto: i64,
}

/// Adds one trun's samples to `frag`; the first sample of the first run (`first_run`) also
/// gives where its data ends, counted from `base` plus the run's data offset.
fn read_trun(
    payload: &[u8],
    tfhd: &Tfhd,
    base: u64,
    first_run: bool,
    frag: &mut Fragment,
) -> Result<(), BmffError> {
    let mut r = Reader::new(payload, "trun");
    let (version, flags) = r.full()?;
    let count = r.u32()?;
    let data_offset = if flags & 0x01 != 0 {
        i64::from(r.u32()? as i32)
    } else {
        0
    };
    if flags & 0x04 != 0 {
        r.u32()?;
    }
    let per_sample = [0x100u32, 0x200, 0x400, 0x800]
        .iter()
        .filter(|f| flags & **f != 0)
        .count();
    if (count as usize).saturating_mul(per_sample * 4) > r.remaining() {
        return Err(BmffError::Truncated("trun"));
    }
    for i in 0..count {
        let sample = read_sample(&mut r, version, flags, tfhd)?;
        let decode = frag.start.saturating_add(frag.duration);
        let pts = i64::try_from(decode)
            .unwrap_or(i64::MAX)
            .saturating_add(sample.cto);
        frag.earliest = frag.earliest.min(pts);
        if first_run && i == 0 {
            let begin = i64::try_from(base)
                .unwrap_or(i64::MAX)
                .saturating_add(data_offset);
            frag.first_sample_end = match (u64::try_from(begin), sample.size) {
                (Ok(begin), Some(size)) => Some(begin.saturating_add(u64::from(size))),
                _ => None,
            };
        }
        frag.duration = frag.duration.saturating_add(u64::from(sample.duration));
    }
    frag.samples += u64::from(count);
    Ok(())
}

/// Reads one trun sample record; what the flags leave out comes from the tfhd defaults.
fn read_sample(
    r: &mut Reader<'_>,
    version: u8,
    flags: u32,
    tfhd: &Tfhd,
) -> Result<Sample, BmffError> {
    let duration = if flags & 0x100 != 0 {
        r.u32()?
    } else {
        tfhd.default_duration.ok_or_else(|| {
            BmffError::Invalid(
                "sample duration is in neither trun nor tfhd (the trex default is unknown)".into(),
            )
        })?
    };
    let size = if flags & 0x200 != 0 {
        Some(r.u32()?)
    } else {
        tfhd.default_size
    };
    if flags & 0x400 != 0 {
        r.u32()?;
    }
    let cto = if flags & 0x800 != 0 {
        let raw = r.u32()?;
        if version == 0 {
            i64::from(raw)
        } else {
            i64::from(raw as i32)
        }
    } else {
        0
    };
    Ok(Sample {
        duration,
        size,
        cto,
    })
}
