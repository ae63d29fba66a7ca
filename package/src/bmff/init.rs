//! Reading an initialisation segment (ftyp + moov): the timescale, handler, sample entry
//! and codec string of its first track.
//!
//! Why a module of its own: the init segment's facts come from a fixed path of boxes (moov,
//! trak, mdia, then mdhd, hdlr and stsd) and a sample entry whose layout depends on the
//! kind of media; the media segments' facts (`fragment`) are read from different boxes.

use super::codec::{audio_codec, codec_string};
use super::{find, find_path, BmffError, Boxes, Reader};

/// What an initialisation segment says about its (first) track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitInfo {
    /// Ticks per second of the track's media time (mdhd).
    pub timescale: u32,
    /// The hdlr handler type: "vide", "soun", "text", "subt", ...
    pub handler: String,
    /// The first sample entry's type: "avc1", "hvc1", "av01", "mp4a", "wvtt", ...
    pub fourcc: String,
    /// Width and height of a visual sample entry.
    pub dimensions: Option<(u32, u32)>,
    /// Channel count of an audio sample entry.
    pub channels: Option<u32>,
    /// Sample rate (Hz) of an audio sample entry.
    pub sample_rate: Option<u32>,
    /// The RFC 6381 codec string, when the entry's type and configuration are known.
    pub codec: Option<String>,
}

const VISUAL: [&str; 8] = [
    "avc1", "avc3", "hvc1", "hev1", "av01", "vp09", "encv", "mp4v",
];

/// Reads the first track of an initialisation segment (ftyp + moov).
pub fn init_info(bytes: &[u8]) -> Result<InitInfo, BmffError> {
    let trak = find_path(Boxes::new(bytes), &[b"moov", b"trak"])?;
    let mdia = find_path(trak.children(), &[b"mdia"])?;
    let mdhd = find_path(mdia.children(), &[b"mdhd"])?;
    let mut r = Reader::new(mdhd.payload, "mdhd");
    let (version, _) = r.full()?;
    r.bytes(if version == 1 { 16 } else { 8 })?;
    let timescale = r.u32()?;
    let hdlr = find_path(mdia.children(), &[b"hdlr"])?;
    let mut r = Reader::new(hdlr.payload, "hdlr");
    r.full()?;
    r.u32()?;
    let handler = String::from_utf8_lossy(r.bytes(4)?).into_owned();
    let stsd = find_path(mdia.children(), &[b"minf", b"stbl", b"stsd"])?;
    let entries = stsd.payload.get(8..).ok_or(BmffError::Truncated("stsd"))?;
    let entry = Boxes::at(entries, stsd.offset + stsd.header_len + 8)
        .next()
        .ok_or(BmffError::Missing("sample entry"))??;
    let fourcc = entry.kind();
    let mut info = InitInfo {
        timescale,
        handler,
        fourcc: fourcc.clone(),
        dimensions: None,
        channels: None,
        sample_rate: None,
        codec: None,
    };
    let p = entry.payload;
    if info.handler == "vide" || VISUAL.contains(&fourcc.as_str()) {
        let mut r = Reader::new(p, "visual sample entry");
        r.bytes(24)?;
        info.dimensions = Some((u32::from(r.u16()?), u32::from(r.u16()?)));
        let children = p
            .get(78..)
            .ok_or(BmffError::Truncated("visual sample entry"))?;
        let config = match fourcc.as_str() {
            "avc1" | "avc3" => find(Boxes::new(children), b"avcC")?,
            "hvc1" | "hev1" => find(Boxes::new(children), b"hvcC")?,
            "av01" => find(Boxes::new(children), b"av1C")?,
            _ => None,
        };
        info.codec = config.and_then(|c| codec_string(&fourcc, c.payload));
    } else if info.handler == "soun" || fourcc == "mp4a" {
        let mut r = Reader::new(p, "audio sample entry");
        r.bytes(16)?;
        info.channels = Some(u32::from(r.u16()?));
        r.bytes(6)?;
        info.sample_rate = Some(r.u32()? >> 16);
        if fourcc == "mp4a" {
            info.codec = audio_codec(p)?;
        } else {
            info.codec = codec_string(&fourcc, &[]);
        }
    } else {
        info.codec = codec_string(&fourcc, &[]);
    }
    Ok(info)
}
