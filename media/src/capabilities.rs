//! What the linked FFmpeg build can do, as one serialisable answer.
//!
//! Why: only the media child (`tessera-media`) links FFmpeg. The worker, the dispatcher and
//! the CLI ask it once through the sandbox and decide from this value (which encoders a
//! worker can run, whether a job may ask for NVENC), so they start without loading FFmpeg.

use tessera_model::capabilities::Capabilities;
use tessera_model::encode::VideoCodec;
use tessera_model::images::ImageFormat;

/// Asks the linked FFmpeg build; cheap, touches no GPU. Runs in the media child.
pub fn capabilities() -> Capabilities {
    Capabilities {
        hw: crate::gpu::hw_capabilities(),
        software_encoders: [VideoCodec::H264, VideoCodec::Hevc, VideoCodec::Av1]
            .into_iter()
            .filter(|&c| crate::gpu::software_encoder_available(c))
            .collect(),
        image_encoders: [ImageFormat::Jpeg, ImageFormat::Webp]
            .into_iter()
            .filter(|&f| crate::encode::stills::image_encoder_available(f))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_ffmpeg_has_the_software_encoders_and_both_image_formats() {
        let caps = capabilities();
        assert!(caps.software_encoder(VideoCodec::H264), "{caps:?}");
        assert!(caps.software_encoder(VideoCodec::Hevc), "{caps:?}");
        assert!(caps.image_encoder(ImageFormat::Jpeg), "{caps:?}");
        assert!(caps.image_encoder(ImageFormat::Webp), "{caps:?}");
        let back: Capabilities =
            serde_json::from_str(&serde_json::to_string(&caps).unwrap()).unwrap();
        assert_eq!(back, caps);
    }

    #[test]
    fn an_empty_answer_offers_nothing() {
        let none = Capabilities::default();
        assert!(!none.software_encoder(VideoCodec::H264));
        assert!(!none.image_encoder(ImageFormat::Jpeg));
        assert!(!none.hw.gpu_path());
    }
}
