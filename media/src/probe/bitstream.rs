//! Where a decoder can really start: H.264 and HEVC random-access points, read from the NAL
//! units of a packet.
//!
//! Why: a demuxer's keyframe flag is not a promise that decoding can start there. x264's
//! intra-refresh flags recovery points whose picture is a P frame and becomes correct only some
//! frames later; a segment that starts decoding there loses frames and shows garbage. Splitting
//! at such a packet is the classic chunked-encoder failure, so the probe checks the bitstream
//! of every flagged packet of these two codecs and the planner only starts at clean points
//! (or far enough ahead of a recovery point for the picture to be whole again).

/// What decoding from a packet gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Decoding can start here: every frame from here on, in output order, is correct
    /// (leading pictures of an open GOP aside, which the planner already handles).
    Clean,
    /// A recovery point: frames become correct after this many frames in decode order.
    Recovery(u32),
    /// Not a place to start.
    None,
}

/// The codecs whose keyframe flags are checked; others keep the demuxer's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NalCodec {
    /// H.264 / AVC.
    H264,
    /// H.265 / HEVC.
    Hevc,
}

impl NalCodec {
    /// The NAL codec for an FFmpeg codec name, if checked.
    pub fn from_name(name: &str) -> Option<NalCodec> {
        match name {
            "h264" => Some(NalCodec::H264),
            "hevc" => Some(NalCodec::Hevc),
            _ => None,
        }
    }
}

/// How NAL units are delimited in a stream's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Start codes (MPEG-TS, raw streams, some AVI/MKV).
    AnnexB,
    /// Big-endian length prefixes of this many bytes (MP4, MKV, FLV with avcC/hvcC).
    Length(usize),
}

impl Framing {
    /// The framing a stream's extradata declares (avcC/hvcC configuration records start with
    /// version 1; anything else is Annex B).
    pub fn from_extradata(codec: NalCodec, extradata: &[u8]) -> Framing {
        let size_byte = match codec {
            NalCodec::H264 => 4,
            NalCodec::Hevc => 21,
        };
        match extradata.first() {
            Some(1) if extradata.len() > size_byte => {
                Framing::Length(usize::from(extradata[size_byte] & 3) + 1)
            }
            _ => Framing::AnnexB,
        }
    }
}

/// Classifies a packet the demuxer flagged as a keyframe.
pub fn classify(codec: NalCodec, framing: Framing, data: &[u8]) -> Access {
    let mut recovery: Option<u32> = None;
    let mut intra_only = true;
    let mut any_slice = false;
    for nal in nal_units(framing, data) {
        match codec {
            NalCodec::H264 => {
                let Some(&head) = nal.first() else { continue };
                match head & 0x1f {
                    5 => return Access::Clean,
                    6 => {
                        if let Some(n) = sei_recovery(&unescape(&nal[1..])) {
                            recovery = Some(n);
                        }
                    }
                    1 => {
                        any_slice = true;
                        intra_only &= h264_slice_is_intra(&unescape(&nal[1..]));
                    }
                    _ => {}
                }
            }
            NalCodec::Hevc => {
                let Some(&head) = nal.first() else { continue };
                match (head >> 1) & 0x3f {
                    16..=23 => return Access::Clean,
                    39 if nal.len() > 2 => {
                        if let Some(n) = sei_recovery(&unescape(&nal[2..])) {
                            recovery = Some(n);
                        }
                    }
                    0..=9 => any_slice = true,
                    _ => {}
                }
            }
        }
    }
    match (codec, recovery) {
        (_, Some(0)) => Access::Clean,
        (_, Some(n)) => Access::Recovery(n),
        // An H.264 I picture with no recovery message: the pre-SEI way of marking a GOP start
        // (many broadcast and camera encoders). Later pictures do not reach behind it in
        // practice, and the planner's leading-frame logic covers open GOPs.
        (NalCodec::H264, None) if any_slice && intra_only => Access::Clean,
        _ => Access::None,
    }
}

/// Whether a packet holds a reference picture (H.264: a slice with nal_ref_idc > 0).
///
/// Why: an H.264 recovery count is in frame_num units, which advance once per reference
/// picture, not once per packet; the probe turns the count into a packet distance with this.
/// For HEVC (whose counts are in picture order) every packet counts.
pub fn is_reference(codec: NalCodec, framing: Framing, data: &[u8]) -> bool {
    match codec {
        NalCodec::H264 => nal_units(framing, data).iter().any(|nal| {
            nal.first()
                .is_some_and(|h| matches!(h & 0x1f, 1 | 5) && h & 0x60 != 0)
        }),
        NalCodec::Hevc => true,
    }
}

/// The NAL units of a packet, without their start codes or length prefixes.
fn nal_units(framing: Framing, data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    match framing {
        Framing::Length(n) => {
            let mut pos = 0usize;
            while pos + n <= data.len() {
                let len = data[pos..pos + n]
                    .iter()
                    .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
                pos += n;
                let end = pos.saturating_add(len).min(data.len());
                out.push(&data[pos..end]);
                pos = end;
            }
        }
        Framing::AnnexB => {
            let mut starts = Vec::new();
            let mut i = 0usize;
            while i + 3 <= data.len() {
                if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
                    starts.push(i + 3);
                    i += 3;
                } else {
                    i += 1;
                }
            }
            for (k, &s) in starts.iter().enumerate() {
                let mut end = starts.get(k + 1).map(|&n| n - 3).unwrap_or(data.len());
                // A four-byte start code leaves a zero before the next three-byte one.
                while end > s && data[end - 1] == 0 && k + 1 < starts.len() {
                    end -= 1;
                }
                out.push(&data[s..end]);
            }
        }
    }
    out
}

/// Removes emulation-prevention bytes (00 00 03 -> 00 00).
fn unescape(nal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(nal.len());
    let mut zeros = 0;
    for &b in nal {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// The recovery_frame_cnt of a recovery-point SEI message (payload type 6) in an SEI RBSP.
fn sei_recovery(rbsp: &[u8]) -> Option<u32> {
    let mut pos = 0usize;
    while pos < rbsp.len() && rbsp[pos] != 0x80 {
        let (kind, next) = sei_number(rbsp, pos)?;
        let (size, next) = sei_number(rbsp, next)?;
        let end = next.checked_add(size as usize)?;
        if kind == 6 {
            return Bits::new(rbsp.get(next..end.min(rbsp.len()))?).ue();
        }
        pos = end;
    }
    None
}

/// An SEI payload type or size: 0xFF bytes each add 255, then a final byte.
fn sei_number(data: &[u8], mut pos: usize) -> Option<(u32, usize)> {
    let mut value = 0u32;
    loop {
        let b = *data.get(pos)?;
        pos += 1;
        value = value.checked_add(u32::from(b))?;
        if b != 0xff {
            return Some((value, pos));
        }
    }
}

/// Whether an H.264 slice header's slice_type is I or SI.
fn h264_slice_is_intra(rbsp: &[u8]) -> bool {
    let mut bits = Bits::new(rbsp);
    let _first_mb = bits.ue();
    matches!(bits.ue().map(|t| t % 5), Some(2) | Some(4))
}

/// A big-endian bit reader with Exp-Golomb codes.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8]) -> Self {
        Bits { data, pos: 0 }
    }

    fn bit(&mut self) -> Option<u32> {
        let byte = *self.data.get(self.pos / 8)?;
        let b = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Some(u32::from(b))
    }

    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        let mut v = 0u32;
        for _ in 0..zeros {
            v = (v << 1) | self.bit()?;
        }
        Some(((1u64 << zeros) - 1 + u64::from(v)) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn length_prefixed(nals: &[&[u8]]) -> Vec<u8> {
        nals.iter()
            .flat_map(|n| {
                let mut v = (n.len() as u32).to_be_bytes().to_vec();
                v.extend_from_slice(n);
                v
            })
            .collect()
    }

    // SEI: payload type 6, size 1, recovery_frame_cnt ue: '1' = 0, '010' = 1, '00110' = 5.
    const SEI_RECOVERY_0: &[u8] = &[0x06, 0x06, 0x01, 0x80, 0x80];
    const SEI_RECOVERY_5: &[u8] = &[0x06, 0x06, 0x01, 0x30, 0x80];
    // Slice headers: first_mb = 0 ('1'), slice_type ue: P = 0 ('1'), I = 7 ('0001000').
    const P_SLICE: &[u8] = &[0x01, 0b1100_0000];
    const I_SLICE: &[u8] = &[0x01, 0b1000_1000];

    #[test]
    fn h264_idr_is_clean() {
        let data = length_prefixed(&[&[0x09, 0xf0], &[0x65, 0x88, 0x84]]);
        assert_eq!(
            classify(NalCodec::H264, Framing::Length(4), &data),
            Access::Clean
        );
        let annexb = [0, 0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x65, 0x88];
        assert_eq!(
            classify(NalCodec::H264, Framing::AnnexB, &annexb),
            Access::Clean
        );
    }

    #[test]
    fn h264_intra_refresh_point_is_a_recovery() {
        let data = length_prefixed(&[SEI_RECOVERY_5, P_SLICE]);
        assert_eq!(
            classify(NalCodec::H264, Framing::Length(4), &data),
            Access::Recovery(5)
        );
        // Without any message, a P picture flagged key is no place to start.
        let data = length_prefixed(&[P_SLICE]);
        assert_eq!(
            classify(NalCodec::H264, Framing::Length(4), &data),
            Access::None
        );
    }

    #[test]
    fn h264_open_gop_i_frames_are_clean() {
        let data = length_prefixed(&[SEI_RECOVERY_0, I_SLICE]);
        assert_eq!(
            classify(NalCodec::H264, Framing::Length(4), &data),
            Access::Clean
        );
        let data = length_prefixed(&[I_SLICE]);
        assert_eq!(
            classify(NalCodec::H264, Framing::Length(4), &data),
            Access::Clean
        );
    }

    #[test]
    fn reference_pictures_by_nal_ref_idc() {
        let p_ref = length_prefixed(&[&[0x41, 0xc0]]);
        let b_nonref = length_prefixed(&[&[0x01, 0xc0]]);
        assert!(is_reference(NalCodec::H264, Framing::Length(4), &p_ref));
        assert!(!is_reference(NalCodec::H264, Framing::Length(4), &b_nonref));
        assert!(is_reference(NalCodec::Hevc, Framing::Length(4), &b_nonref));
    }

    #[test]
    fn hevc_irap_and_trailing() {
        // CRA (21): header byte 21 << 1.
        let cra = length_prefixed(&[&[42, 1, 0xaf]]);
        assert_eq!(
            classify(NalCodec::Hevc, Framing::Length(4), &cra),
            Access::Clean
        );
        // TRAIL_R (1).
        let trail = length_prefixed(&[&[2, 1, 0xaf]]);
        assert_eq!(
            classify(NalCodec::Hevc, Framing::Length(4), &trail),
            Access::None
        );
    }

    #[test]
    fn framing_from_extradata_and_escapes() {
        let avcc = [1, 0x64, 0, 0x1f, 0xff, 0xe1];
        assert_eq!(
            Framing::from_extradata(NalCodec::H264, &avcc),
            Framing::Length(4)
        );
        assert_eq!(
            Framing::from_extradata(NalCodec::H264, &[0, 0, 0, 1]),
            Framing::AnnexB
        );
        assert_eq!(unescape(&[0, 0, 3, 1, 0, 0, 3]), vec![0, 0, 1, 0, 0]);
        // Truncated or garbage data never panics.
        for data in [&[][..], &[0xff; 7], &[0, 0, 1], &[0, 0, 0, 9, 6, 6]] {
            let _ = classify(NalCodec::H264, Framing::Length(4), data);
            let _ = classify(NalCodec::Hevc, Framing::AnnexB, data);
        }
    }
}
