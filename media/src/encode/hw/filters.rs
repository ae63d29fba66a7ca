//! What a GPU rendition's filters and encoder are told: the scale_cuda (and download) filter
//! spec and the frame rate NVENC's rate control gets. Pure, so tested without a card.

/// The scale_cuda filter for a rendition. `passthrough=0` always: with equal size and format
/// scale_cuda would otherwise hand NVDEC's mapped decode surfaces on to NVENC, which holds
/// 15 or more input frames while NVDEC has only a few spare surfaces, so decoding would run
/// dry ("No decoder surfaces left") and frames go missing. At 1:1 a nearest-neighbour copy
/// is exact and cheapest.
pub(super) fn scale_cuda_spec(width: u32, height: u32, format: &str, same_size: bool) -> String {
    let interp = if same_size { "nearest" } else { "bicubic" };
    format!("scale_cuda=w={width}:h={height}:format={format}:interp_algo={interp}:passthrough=0")
}

/// The filters of a rendition: scale_cuda, and for a software encode the download of the
/// scaled frames from the card.
pub(super) fn rendition_filters(
    (width, height): (u32, u32),
    format: &str,
    same_size: bool,
    software_encode: bool,
) -> String {
    let scale = scale_cuda_spec(width, height, format, same_size);
    if software_encode {
        format!("{scale},hwdownload,format={format}")
    } else {
        scale
    }
}

/// The frame rate NVENC's rate control gets: the request's, else the chunk stream's, else
/// (for constant quality only, where it matters little) 30 fps. Without one NVENC assumes
/// 1/time_base fps (90000 for TS) and starves every frame of bits in bitrate mode, so a
/// bitrate rendition without a known rate is refused (the job then runs on the CPU).
pub(super) fn nvenc_frame_rate(
    requested: Option<(i32, i32)>,
    stream: Option<(i32, i32)>,
    bitrate_mode: bool,
) -> Result<(i32, i32), &'static str> {
    let valid = |r: Option<(i32, i32)>| r.filter(|&(n, d)| n > 0 && d > 0);
    match valid(requested).or(valid(stream)) {
        Some(r) => Ok(r),
        None if bitrate_mode => Err("the source's frame rate is unknown, and NVENC's bitrate \
             control needs it"),
        None => Ok((30, 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffmpeg_next as ff;

    #[test]
    fn scale_cuda_never_passes_decoder_surfaces_through() {
        let same = scale_cuda_spec(1920, 1080, "nv12", true);
        assert_eq!(
            same,
            "scale_cuda=w=1920:h=1080:format=nv12:interp_algo=nearest:passthrough=0"
        );
        let down = scale_cuda_spec(1280, 720, "p010le", false);
        assert!(
            down.ends_with(":interp_algo=bicubic:passthrough=0"),
            "{down}"
        );
        // The options exist in this FFmpeg build's scale_cuda (where ffmpeg is installed).
        if let Ok(out) = std::process::Command::new("ffmpeg")
            .args(["-hide_banner", "-h", "filter=scale_cuda"])
            .output()
        {
            let help = String::from_utf8_lossy(&out.stdout);
            if help.contains("scale_cuda") {
                for opt in ["passthrough", "interp_algo", "format"] {
                    assert!(help.contains(opt), "scale_cuda has no {opt}: {help}");
                }
            }
        }
    }

    #[test]
    fn a_software_encode_downloads_the_scaled_frames() {
        assert_eq!(
            rendition_filters((1280, 720), "nv12", false, true),
            "scale_cuda=w=1280:h=720:format=nv12:interp_algo=bicubic:passthrough=0,\
             hwdownload,format=nv12"
        );
        assert!(!rendition_filters((1280, 720), "nv12", false, false).contains("hwdownload"));
        // The graph parses in this build (hwdownload, format and scale_cuda exist).
        crate::init();
        for f in ["hwdownload", "format", "scale_cuda"] {
            assert!(ff::filter::find(f).is_some(), "no {f} filter");
        }
    }

    #[test]
    fn nvenc_always_gets_a_frame_rate() {
        assert_eq!(
            nvenc_frame_rate(Some((30000, 1001)), Some((25, 1)), true),
            Ok((30000, 1001))
        );
        assert_eq!(
            nvenc_frame_rate(Some((0, 0)), Some((25, 1)), true),
            Ok((25, 1))
        );
        assert_eq!(nvenc_frame_rate(Some((0, 1)), None, false), Ok((30, 1)));
        assert!(nvenc_frame_rate(Some((0, 0)), Some((0, 1)), true).is_err());
    }
}
