//! The AAC channel layout a transcoded track is coded in, and the encoder that codes it.
//!
//! Why apart from the transcoder: the rule (every layout up to 7.1 keeps its channels and their
//! places) is codec knowledge with its own tests against FFmpeg's encoder; the transcoder only
//! asks for the first layout the encoder takes.

use ffmpeg_next as ff;

use crate::MediaError;
use tessera_model::audio::AudioRequest;

/// The AAC layouts to try for a track whose decoder says `source` (empty when the container
/// names none) and `channels`, best first.
///
/// The rule: the track keeps its channels and their places. With `stereo_downmix`, anything
/// over two channels is stereo (mono stays mono). Otherwise the source's own layout comes
/// first (FFmpeg's AAC encoder codes mono, stereo, 3.0, 4.0, 5.0, 5.1 and 7.1 in a standard
/// channel configuration and 2.1, quad, 6.1 and the other layouts up to eight channels in a
/// program config element), with 5.1 and 5.0 as AAC's own (back surround) variants, which
/// is what a 5.1(side) source maps to in FFmpeg and in players; then the default layout of
/// that channel count (a PCM track whose container names no layout); stereo last.
pub(crate) fn layouts_to_try(
    source: ff::ChannelLayout,
    channels: u16,
    req: &AudioRequest,
) -> Vec<ff::ChannelLayout> {
    let channels = i32::from(channels.max(1));
    if channels == 1 {
        return vec![ff::ChannelLayout::MONO];
    }
    if req.stereo_downmix && channels > 2 {
        return vec![ff::ChannelLayout::STEREO];
    }
    let own = if source.channels() == channels && !source.is_empty() {
        Some(aac_variant(source))
    } else {
        None
    };
    let mut layouts: Vec<ff::ChannelLayout> = own.into_iter().collect();
    for l in [
        ff::ChannelLayout::default(channels),
        ff::ChannelLayout::STEREO,
    ] {
        if !layouts.contains(&l) && !l.is_empty() {
            layouts.push(aac_variant(l));
        }
    }
    layouts.dedup();
    layouts
}

/// AAC's configuration for a layout that differs from one only in side or back surrounds:
/// 5.0 and 5.1 are coded with back surrounds (channel configurations 5 and 6).
fn aac_variant(layout: ff::ChannelLayout) -> ff::ChannelLayout {
    if layout == ff::ChannelLayout::_5POINT1 {
        ff::ChannelLayout::_5POINT1_BACK
    } else if layout == ff::ChannelLayout::_5POINT0 {
        ff::ChannelLayout::_5POINT0_BACK
    } else {
        layout
    }
}

/// Opens an AAC encoder of `layout` at `rate`; the encoder refuses a layout it has no channel
/// configuration or PCE for.
pub(crate) fn open_aac(
    layout: ff::ChannelLayout,
    rate: u32,
    bitrate_per_channel: u64,
) -> Result<ff::encoder::Audio, MediaError> {
    let codec = ff::encoder::find(ff::codec::Id::AAC)
        .ok_or_else(|| MediaError::encode("aac", "encoder not in this FFmpeg build"))?;
    let mut enc = ff::codec::Context::new_with_codec(codec)
        .encoder()
        .audio()
        .map_err(|e| MediaError::encode("aac", e))?;
    enc.set_rate(rate as i32);
    enc.set_channel_layout(layout);
    enc.set_format(ff::format::Sample::F32(ff::format::sample::Type::Planar));
    enc.set_time_base(ff::Rational::new(1, rate as i32));
    enc.set_bit_rate((bitrate_per_channel * layout.channels().max(1) as u64) as usize);
    enc.set_flags(ff::codec::Flags::GLOBAL_HEADER);
    enc.open_as(codec).map_err(|e| {
        MediaError::encode(
            "aac",
            format!("cannot open ({} channels): {e}", layout.channels()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(stereo_downmix: bool) -> AudioRequest {
        AudioRequest {
            input: "in.mov".into(),
            tracks: vec![1],
            bias_seconds: 0.0,
            copy_tracks: Vec::new(),
            bitrate_per_channel: 64_000,
            output: "audio.nut".into(),
            stereo_downmix,
            run_shifts_seconds: Vec::new(),
        }
    }

    #[test]
    fn every_layout_keeps_its_channels_unless_mixed_down() {
        use ff::ChannelLayout as L;
        let keep = request(false);
        let first = |l: L| layouts_to_try(l, l.channels() as u16, &keep)[0];
        for l in [
            L::STEREO,
            L::_2POINT1,
            L::SURROUND,
            L::QUAD,
            L::_4POINT0,
            L::_5POINT0_BACK,
            L::_5POINT1_BACK,
            L::_6POINT1,
            L::_7POINT1,
        ] {
            assert_eq!(first(l), l, "{l:?}");
        }
        // AAC's 5.0 and 5.1 have back surrounds; a side-surround source maps to them.
        assert_eq!(first(L::_5POINT1), L::_5POINT1_BACK);
        assert_eq!(first(L::_5POINT0), L::_5POINT0_BACK);
        // A track whose container names no layout: the count's default (8 channels: 7.1).
        assert_eq!(layouts_to_try(L::empty(), 8, &keep)[0], L::_7POINT1);
        // Mono is never "mixed down" to two channels; with the downmix, surround is stereo.
        let mix = request(true);
        assert_eq!(layouts_to_try(L::MONO, 1, &mix), vec![L::MONO]);
        assert_eq!(layouts_to_try(L::_7POINT1, 8, &mix), vec![L::STEREO]);
        assert_eq!(layouts_to_try(L::_2POINT1, 3, &mix), vec![L::STEREO]);
        // Stereo is the last resort of every count.
        assert_eq!(
            layouts_to_try(L::_6POINT1, 7, &keep).last(),
            Some(&L::STEREO)
        );
    }

    /// The rule holds with FFmpeg's encoder: it opens every layout up to 7.1 in the count
    /// the source has.
    #[test]
    fn the_aac_encoder_opens_every_layout_up_to_seven_one() {
        crate::init();
        use ff::ChannelLayout as L;
        for l in [
            L::MONO,
            L::STEREO,
            L::_2POINT1,
            L::QUAD,
            L::_5POINT0_BACK,
            L::_5POINT1_BACK,
            L::_6POINT1,
            L::_7POINT1,
        ] {
            let enc = open_aac(l, 48_000, 64_000).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            assert_eq!(enc.channel_layout(), l);
        }
    }
}
