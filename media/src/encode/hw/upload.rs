//! Software-decode path of the GPU encode: convert once on the CPU, upload once per frame.

use ffmpeg_next as ff;

use crate::ffi::cuda::{self, HwRef};
use crate::gpu::{gpu_error, GpuStage};
use crate::MediaError;

/// Software-decoded frames to CUDA frames: one conversion to nv12/p010 on the CPU (source size)
/// and one upload per frame, shared by every rendition.
pub(super) struct Uploader {
    device: HwRef,
    format: ff::format::Pixel,
    dev: u32,
    frames: Option<(HwRef, u32, u32)>,
    scaler: Option<(ff::software::scaling::Context, ff::format::Pixel, u32, u32)>,
}

impl Uploader {
    pub(super) fn new(device: HwRef, format: ff::format::Pixel, dev: u32) -> Self {
        Uploader {
            device,
            format,
            dev,
            frames: None,
            scaler: None,
        }
    }

    pub(super) fn upload(
        &mut self,
        frame: &ff::frame::Video,
    ) -> Result<ff::frame::Video, MediaError> {
        let (w, h) = (frame.width(), frame.height());
        let converted;
        let src = if frame.format() == self.format {
            frame
        } else {
            let key = (frame.format(), w, h);
            if !matches!(&self.scaler, Some((_, f, sw, sh)) if (*f, *sw, *sh) == key) {
                let ctx = ff::software::scaling::Context::get(
                    key.0,
                    w,
                    h,
                    self.format,
                    w,
                    h,
                    ff::software::scaling::Flags::BICUBIC,
                )
                .map_err(|e| MediaError::encode("swscale", e))?;
                self.scaler = Some((ctx, key.0, w, h));
            }
            let mut out = ff::frame::Video::empty();
            if let Some((ctx, ..)) = self.scaler.as_mut() {
                ctx.run(frame, &mut out)
                    .map_err(|e| MediaError::encode("swscale", e))?;
            }
            out.set_color_range(frame.color_range());
            out.set_color_space(frame.color_space());
            out.set_color_primaries(frame.color_primaries());
            out.set_color_transfer_characteristic(frame.color_transfer_characteristic());
            converted = out;
            &converted
        };
        if !matches!(&self.frames, Some((_, fw, fh)) if (*fw, *fh) == (w, h)) {
            let frames = cuda::new_frames(&self.device, self.format, w, h).map_err(|f| {
                gpu_error(self.dev, GpuStage::Running, &f, |r| {
                    MediaError::encode("hwupload", r)
                })
            })?;
            self.frames = Some((frames, w, h));
        }
        let Some((frames, ..)) = self.frames.as_ref() else {
            unreachable!("set just above")
        };
        cuda::upload(frames, src).map_err(|f| {
            gpu_error(self.dev, GpuStage::Running, &f, |r| {
                MediaError::encode("hwupload", r)
            })
        })
    }
}
