//! Inputs `tessera` must refuse, generated from the matrix: truncated
//! copies of matrix clips, an empty file, random bytes with a video
//! extension, and playlists (HLS, ffconcat) that make FFmpeg open other
//! local files.

use std::fs;
use std::path::{Path, PathBuf};

use super::{matrix, Case, Container, Video};
use crate::fixture::{random_file, truncated_copy};

/// One bad input, written into a caller's directory.
#[derive(Debug, Clone)]
pub struct BadInput {
    /// Short name for messages (`truncated-mkv-...`, `empty`, ...).
    pub name: String,
    /// The file to pass to `tessera`.
    pub path: PathBuf,
    /// What is wrong with it.
    pub what: String,
}

/// Containers whose matrix clips are truncated: each keeps an index or
/// header that promises more than the cut file holds (MP4/MOV: the `moov`
/// at the end is cut off; Matroska/WebM: segment and cluster sizes; AVI:
/// the `idx1` index; MXF: the footer partition).
const TRUNCATED: [Container; 6] = [
    Container::Mp4,
    Container::Mov,
    Container::Mkv,
    Container::Webm,
    Container::Avi,
    Container::Mxf,
];

/// The first matrix case in `c` that is small (not 1080p DNxHD).
fn small_case(c: Container) -> Case {
    matrix()
        .into_iter()
        .find(|k| k.container == c && k.video != Video::Dnxhd)
        .unwrap_or_else(|| panic!("matrix has no small {c:?} case"))
}

fn write(path: PathBuf, text: &str) -> PathBuf {
    fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// Builds every bad input in `dir` (matrix clips are built or taken from
/// the cache first). Referenced files of the playlists are copied into
/// `dir` so the playlists point at real, valid media.
pub fn bad_inputs(dir: &Path) -> Vec<BadInput> {
    let mut out = Vec::new();
    for c in TRUNCATED {
        let case = small_case(c);
        let src = case.build();
        let len = fs::metadata(&src)
            .unwrap_or_else(|e| panic!("stat {}: {e}", src.display()))
            .len();
        let name = format!("truncated-{}", case.name());
        let file = format!("{name}.{}", c.ext());
        out.push(BadInput {
            path: truncated_copy(&src, dir, &file, len / 2),
            what: format!("{} cut to {} of {len} bytes", case.name(), len / 2),
            name,
        });
    }
    out.push(BadInput {
        name: "empty".into(),
        path: write(dir.join("empty.mkv"), ""),
        what: "a zero-byte .mkv".into(),
    });
    out.push(BadInput {
        name: "random".into(),
        path: random_file(dir, "noise.mov", 200 * 1024, 0x00c0_ffee),
        what: "200 KiB of random bytes named .mov".into(),
    });

    let ts = small_case(Container::MpegTs).build();
    fs::copy(&ts, dir.join("seg0.ts")).expect("copy HLS segment");
    let hls = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:0\n\
               #EXTINF:3.0,\nseg0.ts\n#EXT-X-ENDLIST\n";
    out.push(BadInput {
        name: "hls".into(),
        path: write(dir.join("playlist.m3u8"), hls),
        what: "an HLS playlist naming a local .ts segment".into(),
    });

    let mp4 = small_case(Container::Mp4).build();
    fs::copy(&mp4, dir.join("part.mp4")).expect("copy concat part");
    out.push(BadInput {
        name: "ffconcat".into(),
        path: write(
            dir.join("list.ffconcat"),
            "ffconcat version 1.0\nfile 'part.mp4'\n",
        ),
        what: "an ffconcat script naming a local .mp4".into(),
    });
    out
}
