//! Opening inputs and reading packets with errors that name the file.
//!
//! Why: ffmpeg-next's packet iterator turns I/O errors into a silent end of stream, which would
//! make a truncated upload look complete. This reader reports them.

use std::path::Path;

use ffmpeg_next as ff;

use crate::MediaError;
use tessera_model::probe::Rational;

/// How many corrupt packets in a row the reader skips before giving up on the file.
const MAX_SKIPPED_CORRUPT: u32 = 1000;

/// The demuxers tessera opens: containers and elementary streams that hold their media
/// themselves. Formats that name other files or URLs (HLS and DASH playlists, ffconcat,
/// image sequences, SDP/RTSP, tee, data URIs) are absent, so an uploaded playlist is refused,
/// never fetched. Audio-only formats stay so their error says "no video".
pub const ACCEPTED_DEMUXERS: &str = "mov,matroska,mpegts,mpeg,mpegvideo,flv,avi,nut,mxf,asf,\
ogg,dv,ivf,h264,hevc,m4v,obu,yuv4mpegpipe,rm,wtv,gxf,mjpeg,wav,mp3,aac,flac,aiff,w64";

/// Inputs are read from local files only; no demuxer may open a network or pipe protocol.
const ACCEPTED_PROTOCOLS: &str = "file";

/// Opens an input after checking that it exists and is not empty.
pub(crate) fn open_input(path: &Path) -> Result<ff::format::context::Input, MediaError> {
    open_checked(path, true)
}

/// Opens a file tessera wrote itself (an encoded segment, a stitched output) to read its
/// packets: the demuxer's header only, without decoding the first frames to guess what the
/// header lacks. Not for uploads: a stream's pixel format, and what else only a decode tells,
/// are unset; and where the container stores no decode timestamps (NUT, Matroska) packets of
/// a stream with B-frames come without dts. Their pts, flags and bytes are the file's.
pub(crate) fn open_own_file(path: &Path) -> Result<ff::format::context::Input, MediaError> {
    open_checked(path, false)
}

/// [`open_own_file`] for a reader that needs every packet's dts as well: header only where the
/// container stores them (MP4/MOV), with the decode probe otherwise.
pub(crate) fn open_own_file_with_dts(
    path: &Path,
) -> Result<ff::format::context::Input, MediaError> {
    let mut ictx = open_own_file(path)?;
    if !ictx.format().name().starts_with("mov") {
        // The probe on the context already open, not a second open of the file.
        crate::ffi::find_stream_info(&mut ictx)
            .map_err(|e| MediaError::invalid(path, describe_open_error(e)))?;
    }
    Ok(ictx)
}

fn open_checked(path: &Path, stream_info: bool) -> Result<ff::format::context::Input, MediaError> {
    let meta = std::fs::metadata(path).map_err(|e| MediaError::InputUnreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    if !meta.is_file() {
        return Err(MediaError::InputUnreadable {
            path: path.display().to_string(),
            reason: "not a regular file".into(),
        });
    }
    if meta.len() == 0 {
        return Err(MediaError::InputEmpty {
            path: path.display().to_string(),
        });
    }
    let mut options = ff::Dictionary::new();
    options.set("format_whitelist", ACCEPTED_DEMUXERS);
    options.set("protocol_whitelist", ACCEPTED_PROTOCOLS);
    let opened = if stream_info {
        ff::format::input_with_dictionary(path, options)
    } else {
        crate::ffi::open_without_stream_info(path, options)
    };
    opened.map_err(|e| match refused_kind(path) {
        Some(kind) => MediaError::Unsupported {
            path: path.display().to_string(),
            reason: format!(
                "{kind} refers to other files or URLs; tessera accepts only self-contained \
                     media files"
            ),
        },
        None => MediaError::invalid(path, describe_open_error(e)),
    })
}

/// What a refused reference-style input is, from its first bytes (None for anything else).
fn refused_kind(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 512];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head[..n]);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with("#EXTM3U") {
        Some("an HLS playlist (m3u8)")
    } else if text.starts_with("ffconcat") {
        Some("an ffconcat script")
    } else if text.starts_with("<?xml") && text.contains("<MPD") || text.starts_with("<MPD") {
        Some("a DASH manifest (mpd)")
    } else if text.starts_with("v=0") {
        Some("an SDP description")
    } else {
        None
    }
}

fn describe_open_error(e: ff::Error) -> String {
    match e {
        ff::Error::InvalidData => {
            "unrecognised or corrupt container (truncated upload, not a video, or missing index)"
                .to_string()
        }
        // The one way opening a readable file fails with EINVAL: its format is off the list.
        ff::Error::Other { errno } if errno == libc::EINVAL => {
            "container format not accepted (tessera reads self-contained media files: MP4/MOV, \
             Matroska/WebM, MPEG-TS/PS, FLV, AVI, NUT, MXF, ...)"
                .to_string()
        }
        other => other.to_string(),
    }
}

/// Reads the next packet; `Ok(None)` at a clean end of file, `Err` on an I/O error.
pub(crate) fn read_packet(
    ictx: &mut ff::format::context::Input,
    path: &Path,
) -> Result<Option<ff::Packet>, MediaError> {
    let mut skipped = 0;
    loop {
        let mut packet = ff::Packet::empty();
        match packet.read(ictx) {
            Ok(()) => return Ok(Some(packet)),
            Err(ff::Error::Eof) => return Ok(None),
            Err(ff::Error::InvalidData) if skipped < MAX_SKIPPED_CORRUPT => skipped += 1,
            Err(e) => return Err(MediaError::decode(path, format!("reading packets: {e}"))),
        }
    }
}

/// A packet's (pts, dts), falling back to each other; `None` when it has neither.
///
/// The probe's index counts every video packet, timed or not (an MPEG program stream carries
/// H.264 and HEVC in PES packets that may hold two access units, of which only the first gets
/// the PES's timestamp, and a recording cut mid-PES starts with one: their pictures are frames
/// of the source all the same). The probe gives the untimed ones times (scan.rs, reorder.rs);
/// the split takes them from the probe, so probe and split count the same packets.
pub(crate) fn packet_times(packet: &ff::Packet) -> Option<(i64, i64)> {
    let pts = packet.pts().or(packet.dts())?;
    Some((pts, packet.dts().unwrap_or(pts)))
}

/// The number of samples a packet's skip-samples side data tells the decoder to drop at its
/// start (0 when none).
pub(crate) fn skip_samples(packet: &ff::Packet) -> i64 {
    packet
        .side_data()
        .find(|sd| sd.kind() == ff::codec::packet::side_data::Type::SkipSamples)
        .and_then(|sd| {
            sd.data()
                .get(..4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        })
        .map(i64::from)
        .unwrap_or(0)
}

/// An FFmpeg rational (a stream's time base or rate) as tessera's plain [`Rational`].
pub(crate) fn rational(r: ff::Rational) -> Rational {
    Rational::new(r.numerator(), r.denominator())
}

/// Opens a decoder for a stream, mapping "no decoder" to an unsupported-input error.
pub(crate) fn open_video_decoder(
    stream: &ff::format::stream::Stream,
    path: &Path,
    threads: usize,
) -> Result<ff::decoder::Video, MediaError> {
    open_video_decoder_with(stream, path, threads, |_| {})
}

/// Like `open_video_decoder`, letting `prepare` adjust the context before it is opened (the
/// GPU path attaches NVDEC there).
pub(crate) fn open_video_decoder_with(
    stream: &ff::format::stream::Stream,
    path: &Path,
    threads: usize,
    prepare: impl FnOnce(&mut ff::codec::Context),
) -> Result<ff::decoder::Video, MediaError> {
    let mut ctx = ff::codec::Context::from_parameters(stream.parameters())
        .map_err(|e| MediaError::invalid(path, e))?;
    prepare(&mut ctx);
    ctx.set_threading(ff::threading::Config {
        kind: ff::threading::Type::Frame,
        count: threads.max(1),
        ..Default::default()
    });
    let mut dec = ctx.decoder();
    dec.set_packet_time_base(stream.time_base());
    dec.video().map_err(|e| unsupported_codec(stream, path, e))
}

/// Opens the decoder called `name` for a video stream (where the default decoder of the
/// codec is the wrong one, e.g. AV1 on NVDEC); `prepare` runs before it opens.
pub(crate) fn open_named_video_decoder(
    stream: &ff::format::stream::Stream,
    path: &Path,
    name: &str,
    prepare: impl FnOnce(&mut ff::codec::Context),
) -> Result<ff::decoder::Video, MediaError> {
    let codec = ff::decoder::find_by_name(name).ok_or_else(|| MediaError::Unsupported {
        path: path.display().to_string(),
        reason: format!("this FFmpeg build has no {name} decoder"),
    })?;
    let mut ctx = ff::codec::Context::new_with_codec(codec);
    ctx.set_parameters(stream.parameters())
        .map_err(|e| MediaError::invalid(path, e))?;
    prepare(&mut ctx);
    let mut dec = ctx.decoder();
    dec.set_packet_time_base(stream.time_base());
    dec.open_as(codec)
        .and_then(|o| o.video())
        .map_err(|e| unsupported_codec(stream, path, e))
}

/// Opens an audio decoder for a stream.
pub(crate) fn open_audio_decoder(
    stream: &ff::format::stream::Stream,
    path: &Path,
) -> Result<ff::decoder::Audio, MediaError> {
    let ctx = ff::codec::Context::from_parameters(stream.parameters())
        .map_err(|e| MediaError::invalid(path, e))?;
    let mut dec = ctx.decoder();
    dec.set_packet_time_base(stream.time_base());
    dec.audio().map_err(|e| unsupported_codec(stream, path, e))
}

fn unsupported_codec(stream: &ff::format::stream::Stream, path: &Path, e: ff::Error) -> MediaError {
    MediaError::Unsupported {
        path: path.display().to_string(),
        reason: format!(
            "stream {} codec {:?} cannot be decoded: {e}",
            stream.index(),
            stream.parameters().id()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything of a file that the stitch and the QC gate read: per stream the time base
    /// and extradata, per packet its stream, timestamps, flags and size.
    fn seen(mut ictx: ff::format::context::Input, path: &Path) -> Vec<String> {
        let mut out: Vec<String> = ictx
            .streams()
            .map(|s| {
                let extradata = crate::ffi::stream_extradata(&s);
                format!("stream {} {:?} {:?}", s.index(), s.time_base(), extradata)
            })
            .collect();
        while let Some(p) = read_packet(&mut ictx, path).unwrap() {
            out.push(format!(
                "{} {:?} {:?} {} {}",
                p.stream(),
                p.pts(),
                p.dts(),
                p.is_key(),
                p.size()
            ));
        }
        out
    }

    #[test]
    fn tessera_files_read_the_same_without_the_stream_info_probe() {
        crate::init();
        let dir = tempfile::tempdir().unwrap();
        for name in ["seg.nut", "out.mp4", "out.mkv"] {
            let path = dir.path().join(name);
            let made = std::process::Command::new("ffmpeg")
                .args(["-v", "error", "-f", "lavfi", "-i"])
                .arg("testsrc2=size=320x240:rate=25:duration=2")
                .args(["-f", "lavfi", "-i", "sine=duration=2"])
                .args([
                    "-c:v",
                    "libx264",
                    "-bf",
                    "3",
                    "-g",
                    "20",
                    "-flags",
                    "+global_header",
                ])
                .args(["-c:a", "aac"])
                .arg(&path)
                .status()
                .unwrap();
            assert!(made.success(), "ffmpeg could not make {name}");
            let probed = seen(open_input(&path).unwrap(), &path);
            assert!(probed.len() > 50, "{name}: {probed:?}");
            // pts, flags and bytes are the file's either way; dts too where asked for.
            let header_only = seen(open_own_file(&path).unwrap(), &path);
            let strip = |lines: &[String]| -> Vec<String> {
                lines
                    .iter()
                    .map(|l| {
                        let f: Vec<&str> = l.split(' ').collect();
                        if l.starts_with("stream") {
                            l.clone()
                        } else {
                            format!("{} {} {} {}", f[0], f[1], f[f.len() - 2], f[f.len() - 1])
                        }
                    })
                    .collect()
            };
            assert_eq!(strip(&probed), strip(&header_only), "{name}");
            let with_dts = seen(open_own_file_with_dts(&path).unwrap(), &path);
            assert_eq!(probed, with_dts, "{name}");
        }
        let missing = dir.path().join("missing.nut");
        assert!(matches!(
            open_own_file(&missing),
            Err(MediaError::InputUnreadable { .. })
        ));
    }
}
