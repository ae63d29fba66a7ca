//! RFC 6381 codec strings from sample-entry configuration records (avcC, hvcC, av1C, esds).
//!
//! Why a module of its own: the bit layouts of each record are the part most worth reading
//! against the specifications, apart from the box walking.

use super::{find, BmffError, Boxes, Reader};

/// The mp4a codec string from an AudioSampleEntry payload: its esds, found after the
/// ISO header (28 bytes) or a QuickTime version 1/2 sound description (44 / 64 bytes).
pub(super) fn audio_codec(entry: &[u8]) -> Result<Option<String>, BmffError> {
    for start in [28usize, 44, 64] {
        let Some(children) = entry.get(start..) else {
            continue;
        };
        let Ok(Some(esds)) = find(Boxes::new(children), b"esds") else {
            continue;
        };
        let (oti, asc) = esds_config(esds.payload)?;
        if oti != 0x40 {
            return Ok(Some(format!("mp4a.{oti:02X}")));
        }
        return Ok(Some(match asc {
            Some(asc) => codec_string("mp4a", asc).unwrap_or_else(|| "mp4a.40".into()),
            None => "mp4a.40".into(),
        }));
    }
    Ok(None)
}

/// Reads an MPEG-4 descriptor header (tag, payload) with the 7-bit continuation size.
fn descriptor<'a>(r: &mut Reader<'a>) -> Result<(u8, &'a [u8]), BmffError> {
    let tag = r.u8()?;
    let mut size = 0usize;
    for _ in 0..4 {
        let b = r.u8()?;
        size = (size << 7) | usize::from(b & 0x7f);
        if b & 0x80 == 0 {
            break;
        }
    }
    Ok((tag, r.bytes(size)?))
}

/// From an esds payload (FullBox): the objectTypeIndication and the AudioSpecificConfig.
pub(crate) fn esds_config(payload: &[u8]) -> Result<(u8, Option<&[u8]>), BmffError> {
    let mut r = Reader::new(payload, "esds");
    r.full()?;
    let (tag, es) = descriptor(&mut r)?;
    if tag != 0x03 {
        return Err(BmffError::Invalid(format!(
            "esds starts with tag {tag:#04x}, not ES_Descriptor"
        )));
    }
    let mut r = Reader::new(es, "ES_Descriptor");
    r.u16()?;
    let flags = r.u8()?;
    if flags & 0x80 != 0 {
        r.u16()?;
    }
    if flags & 0x40 != 0 {
        let len = r.u8()?;
        r.bytes(usize::from(len))?;
    }
    if flags & 0x20 != 0 {
        r.u16()?;
    }
    while r.remaining() > 0 {
        let (tag, body) = descriptor(&mut r)?;
        if tag != 0x04 {
            continue;
        }
        let mut d = Reader::new(body, "DecoderConfigDescriptor");
        let oti = d.u8()?;
        d.bytes(12)?;
        while d.remaining() > 0 {
            let (tag, info) = descriptor(&mut d)?;
            if tag == 0x05 {
                return Ok((oti, Some(info)));
            }
        }
        return Ok((oti, None));
    }
    Err(BmffError::Missing("DecoderConfigDescriptor"))
}

/// The RFC 6381 codec string from a sample entry type and its raw configuration record
/// (avcC / hvcC / av1C payload, or the AAC AudioSpecificConfig for "mp4a").
///
/// Why it takes the raw record: MPEG-TS packages have only the codec extradata, and must
/// advertise exactly the string an fMP4 package of the same stream would.
pub fn codec_string(fourcc: &str, config: &[u8]) -> Option<String> {
    match fourcc {
        "avc1" | "avc3" => {
            let c = config.get(1..4)?;
            Some(format!("{fourcc}.{:02x}{:02x}{:02x}", c[0], c[1], c[2]))
        }
        "hvc1" | "hev1" => hevc_string(fourcc, config),
        "av01" => {
            let c = config.get(1..3)?;
            let profile = c[0] >> 5;
            let level = c[0] & 0x1f;
            let tier = if c[1] & 0x80 != 0 { 'H' } else { 'M' };
            let depth = match (c[1] & 0x40 != 0, c[1] & 0x20 != 0) {
                (false, _) => 8,
                (true, false) => 10,
                (true, true) => 12,
            };
            Some(format!("av01.{profile}.{level:02}{tier}.{depth:02}"))
        }
        "mp4a" => {
            let b0 = *config.first()?;
            let mut aot = b0 >> 3;
            if aot == 31 {
                let b1 = *config.get(1)?;
                aot = 32 + (((b0 & 0x07) << 3) | (b1 >> 5));
            }
            Some(format!("mp4a.40.{aot}"))
        }
        "wvtt" => Some("wvtt".into()),
        "ac-3" | "ec-3" => Some(fourcc.into()),
        "Opus" => Some("opus".into()),
        "fLaC" => Some("flac".into()),
        _ => None,
    }
}

/// ISO/IEC 14496-15 Annex E: hvc1.[A-C]?profile.compat(reversed hex).[LH]level[.constraints].
fn hevc_string(fourcc: &str, c: &[u8]) -> Option<String> {
    let c = c.get(..13)?;
    let space = match c[1] >> 6 {
        0 => "",
        1 => "A",
        2 => "B",
        _ => "C",
    };
    let tier = if c[1] & 0x20 != 0 { 'H' } else { 'L' };
    let profile = c[1] & 0x1f;
    let compat = u32::from_be_bytes([c[2], c[3], c[4], c[5]]).reverse_bits();
    let level = c[12];
    let mut out = format!("{fourcc}.{space}{profile}.{compat:X}.{tier}{level}");
    let constraints = &c[6..12];
    let used = constraints
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |i| i + 1);
    for b in &constraints[..used] {
        out.push_str(&format!(".{b:02X}"));
    }
    Some(out)
}
