//! Oracles for a package's images: an image's size and codec as ffprobe reads it, and how
//! closely it matches each of a few source frames (PSNR), which tells which frame it shows.

use std::path::Path;

use crate::probe::ffprobe_json;
use crate::run::run_ffmpeg_tool;

/// (codec name, width, height) of an image file, as ffprobe reads it.
pub fn image_info(path: &Path) -> (String, u64, u64) {
    let v = ffprobe_json(path, &["-show_entries", "stream=codec_name,width,height"]);
    let s = &v["streams"][0];
    (
        s["codec_name"].as_str().unwrap_or_default().to_string(),
        s["width"].as_u64().unwrap_or(0),
        s["height"].as_u64().unwrap_or(0),
    )
}

/// A region of an image: x, y, width, height.
pub type Crop = (u64, u64, u64, u64);

/// PSNR (dB, luma and chroma averaged) of `image` (or the `crop` of it) against each source
/// frame `first ..= last` (decode order of shown frames, counted from 0), each scaled to the
/// image's size with bicubic: one value per frame, in order.
pub fn psnr_against_frames(
    image: &Path,
    crop: Option<Crop>,
    source: &Path,
    (first, last): (u64, u64),
) -> Vec<f64> {
    let (_, iw, ih) = image_info(image);
    let (x, y, w, h) = crop.unwrap_or((0, 0, iw, ih));
    let graph = format!(
        "[0:v]select='between(n\\,{first}\\,{last})',settb=1/25,setpts=N,\
         scale={w}:{h}:flags=bicubic,format=yuv420p[a];\
         [1:v]crop={w}:{h}:{x}:{y},scale=out_range=tv,format=yuv420p,settb=1/25,setpts=N[b];\
         [a][b]psnr=stats_file=-:shortest=1"
    );
    let run = run_ffmpeg_tool(
        "ffmpeg",
        [
            "-v".as_ref(),
            "error".as_ref(),
            "-nostdin".as_ref(),
            "-i".as_ref(),
            source.as_os_str(),
            "-loop".as_ref(),
            "1".as_ref(),
            "-i".as_ref(),
            image.as_os_str(),
            "-filter_complex".as_ref(),
            std::ffi::OsStr::new(&graph),
            "-f".as_ref(),
            "null".as_ref(),
            "-".as_ref(),
        ],
    );
    let values: Vec<f64> = run
        .stdout
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("psnr_avg:"))
        })
        .map(|v| {
            if v == "inf" {
                99.0
            } else {
                v.parse().unwrap_or(0.0)
            }
        })
        .collect();
    assert_eq!(
        values.len() as u64,
        last - first + 1,
        "PSNR of {} against frames {first}..={last}: {}",
        image.display(),
        run.describe()
    );
    values
}

/// Asserts that `image` (or its `crop`) shows source frame `frame`: its PSNR against that
/// frame is at least `min_psnr` and above its PSNR against the two frames on either side
/// (of the source's `total` frames).
pub fn assert_shows_frame(
    image: &Path,
    crop: Option<Crop>,
    (source, total): (&Path, u64),
    frame: u64,
    min_psnr: f64,
) {
    let first = frame.saturating_sub(2);
    let last = (frame + 2).min(total.saturating_sub(1));
    let psnr = psnr_against_frames(image, crop, source, (first, last));
    let at = (frame - first) as usize;
    let best = psnr
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i);
    assert!(
        psnr[at] >= min_psnr && best == Some(at),
        "{} ({crop:?}) should show frame {frame}: PSNR against frames {first}..: {psnr:?}",
        image.display()
    );
}
