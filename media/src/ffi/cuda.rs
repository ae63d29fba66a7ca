//! The CUDA side of the FFI: device and frames contexts, NVDEC on a decoder, hw frames on the
//! filter graph and encoder, upload, and the log capture that lets GPU failures be classified.
//!
//! Why here: like the rest of `ffi`, every `unsafe` block of the GPU path lives in this file
//! (and pci.rs, the driver call that names the card)
//! and says which invariant it keeps; callers get owned handles (`HwRef`) and plain results.

mod pci;
pub(crate) use pci::pci_bus_id;

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, OnceLock};

use ff::ffi;
use ffmpeg_next as ff;
use libc::{c_int, c_void};

use super::avlog::take_log;
pub(crate) use super::avlog::{clear_log, LogCapture};

/// A failed FFmpeg call: what was being done, FFmpeg's error code, and what FFmpeg logged on
/// this thread meanwhile (NVENC and the CUDA loader say the useful part only in the log).
#[derive(Debug, Clone)]
pub(crate) struct AvFailure {
    /// The negative AVERROR.
    pub code: i32,
    what: String,
    log: String,
}

impl AvFailure {
    /// Records a failure and takes the log captured so far on this thread.
    pub(crate) fn new(code: i32, what: impl Into<String>) -> Self {
        AvFailure {
            code,
            what: what.into(),
            log: take_log(),
        }
    }

    /// From an ffmpeg-next error.
    pub(crate) fn from_error(e: ff::Error, what: impl Into<String>) -> Self {
        AvFailure::new(c_int::from(e), what)
    }

    /// One line for error messages: action, FFmpeg's error, and the tail of the log.
    pub(crate) fn describe(&self) -> String {
        let err = ff::Error::from(self.code);
        let log: String = self.log.split_whitespace().collect::<Vec<_>>().join(" ");
        let tail = log
            .char_indices()
            .rev()
            .nth(599)
            .map_or(log.as_str(), |(i, _)| &log[i..]);
        if tail.is_empty() {
            format!("{}: {err}", self.what)
        } else {
            format!("{}: {err} ({tail})", self.what)
        }
    }
}

/// An owned reference to an FFmpeg buffer holding a hw device or hw frames context.
pub(crate) struct HwRef(NonNull<ffi::AVBufferRef>);

// SAFETY: an AVBufferRef is a refcounted handle whose count is atomic; the CUDA device and
// frames contexts it points to are safe to use from any thread (FFmpeg pushes the CUcontext
// around each use), and this type never hands out the buffer for mutation.
unsafe impl Send for HwRef {}
// SAFETY: as above; shared access only takes new references.
unsafe impl Sync for HwRef {}

impl HwRef {
    /// A new reference to a buffer someone else owns; `None` when it is null.
    fn new_ref(ptr: *const ffi::AVBufferRef) -> Option<HwRef> {
        if ptr.is_null() {
            return None;
        }
        // SAFETY: `ptr` is a live AVBufferRef (checked non-null, owned by a context we borrow);
        // av_buffer_ref returns a new reference or null on allocation failure.
        NonNull::new(unsafe { ffi::av_buffer_ref(ptr) }).map(HwRef)
    }

    fn as_ptr(&self) -> *mut ffi::AVBufferRef {
        self.0.as_ptr()
    }

    /// Gives the reference away (to a context field that unrefs it when freed).
    fn into_raw(self) -> *mut ffi::AVBufferRef {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// (sw_format, width, height) of a hw frames context.
    pub(crate) fn frames_info(&self) -> (ff::format::Pixel, u32, u32) {
        // SAFETY: only called on frames-context buffers (from a frame, a sink or
        // `new_frames`), whose data is an initialised AVHWFramesContext that lives as long as
        // the reference we hold.
        unsafe {
            let fc = (*self.as_ptr()).data as *const ffi::AVHWFramesContext;
            (
                (*fc).sw_format.into(),
                (*fc).width.max(0) as u32,
                (*fc).height.max(0) as u32,
            )
        }
    }
}

impl Clone for HwRef {
    fn clone(&self) -> Self {
        HwRef::new_ref(self.as_ptr()).expect("av_buffer_ref: out of memory")
    }
}

impl Drop for HwRef {
    fn drop(&mut self) {
        let mut p = self.0.as_ptr();
        // SAFETY: we own exactly one reference; av_buffer_unref releases it and nulls `p`.
        unsafe { ffi::av_buffer_unref(&mut p) };
    }
}

fn devices() -> &'static Mutex<HashMap<u32, HwRef>> {
    static DEVICES: OnceLock<Mutex<HashMap<u32, HwRef>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The CUDA device context of card `ordinal`, created once per process and kept.
pub(crate) fn device(ordinal: u32) -> Result<HwRef, AvFailure> {
    let mut map = devices().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = map.get(&ordinal) {
        return Ok(d.clone());
    }
    let name = CString::new(ordinal.to_string()).expect("digits have no NUL");
    let mut raw: *mut ffi::AVBufferRef = ptr::null_mut();
    // SAFETY: `raw` is a valid out-pointer, `name` a NUL-terminated string alive for the call,
    // a null dictionary means no options; on failure FFmpeg leaves `raw` null.
    let ret = unsafe {
        ffi::av_hwdevice_ctx_create(
            &mut raw,
            ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA,
            name.as_ptr(),
            ptr::null_mut(),
            0,
        )
    };
    match NonNull::new(raw) {
        Some(p) if ret >= 0 => {
            let d = HwRef(p);
            map.insert(ordinal, d.clone());
            Ok(d)
        }
        Some(p) => {
            drop(HwRef(p));
            Err(AvFailure::new(
                ret,
                format!("creating CUDA device {ordinal}"),
            ))
        }
        None => Err(AvFailure::new(
            ret.min(-1),
            format!("creating CUDA device {ordinal}"),
        )),
    }
}

/// Drops the cached context of one card (after a fault), so the next use creates a new one.
pub(crate) fn forget_device(ordinal: u32) {
    devices()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&ordinal);
}

/// Drops every cached device context.
pub(crate) fn forget_all_devices() {
    devices().lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Whether the build has the CUDA hwdevice type and an NVDEC hwaccel for H.264.
pub(crate) fn cuda_hwaccel_built() -> bool {
    use ffi::AVHWDeviceType::{AV_HWDEVICE_TYPE_CUDA as CUDA, AV_HWDEVICE_TYPE_NONE as NONE};
    let mut t = NONE;
    loop {
        // SAFETY: av_hwdevice_iterate_types only reads a static table and accepts any member
        // of the enum, including the one it returned last.
        t = unsafe { ffi::av_hwdevice_iterate_types(t) };
        if t == NONE {
            return false;
        }
        if t == CUDA {
            break;
        }
    }
    let Some(codec) = ff::decoder::find(ff::codec::Id::H264) else {
        return false;
    };
    let method = ffi::AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX as c_int;
    for i in 0.. {
        // SAFETY: the codec is a static libavcodec descriptor; avcodec_get_hw_config returns a
        // pointer into its static config table, or null past the end.
        let cfg = unsafe { ffi::avcodec_get_hw_config(codec.as_ptr(), i) };
        if cfg.is_null() {
            return false;
        }
        // SAFETY: non-null entries of that table are valid for the life of the process.
        let (dev, methods) = unsafe { ((*cfg).device_type, (*cfg).methods) };
        if dev == CUDA && methods & method != 0 {
            return true;
        }
    }
    false
}

/// get_format callback: CUDA frames when the decoder offers them (NVDEC took the stream),
/// otherwise FFmpeg's default software choice (the encode path then uploads).
unsafe extern "C" fn pick_cuda(
    ctx: *mut ffi::AVCodecContext,
    fmts: *const ffi::AVPixelFormat,
) -> ffi::AVPixelFormat {
    let mut p = fmts;
    // SAFETY: FFmpeg passes a list terminated by AV_PIX_FMT_NONE, readable for this call.
    unsafe {
        while *p != ffi::AVPixelFormat::AV_PIX_FMT_NONE {
            if *p == ffi::AVPixelFormat::AV_PIX_FMT_CUDA {
                return *p;
            }
            p = p.add(1);
        }
        ffi::avcodec_default_get_format(ctx, fmts)
    }
}

/// Surfaces NVDEC adds to the stream's own need (its DPB, plus one). Why: frames the
/// pipeline holds (the scale graph, NVENC's look-ahead) come out of the decoder's pool, and a
/// stream whose reorder depth grows past what its SPS announced meets "No decoder surfaces
/// left" without them (GPU re-review, failure 1). The total stays under NVDEC's 32 (a DPB of
/// 16 at most, plus one, plus these).
const NVDEC_EXTRA_SURFACES: i32 = 4;

/// Sizes a (not yet opened) decoder's hardware frame pool for the pipeline.
fn size_surfaces(ctx: &mut ff::codec::Context) {
    // SAFETY: the context is allocated and not opened; `extra_hw_frames` is a plain int
    // FFmpeg reads when it creates the hwaccel's frames pool at open.
    unsafe { (*ctx.as_mut_ptr()).extra_hw_frames = NVDEC_EXTRA_SURFACES };
}

/// Puts a decoder (not yet opened) on NVDEC: the card's device context, a get_format that
/// picks CUDA frames, and surfaces for the frames the pipeline holds.
pub(crate) fn attach_nvdec(ctx: &mut ff::codec::Context, device: &HwRef) {
    size_surfaces(ctx);
    let dev = device.clone();
    // SAFETY: the context is allocated and not opened, so FFmpeg reads neither field yet;
    // hw_device_ctx takes ownership of the new reference (avcodec_free_context unrefs it);
    // `pick_cuda` matches the get_format signature and keeps its contract.
    unsafe {
        let c = ctx.as_mut_ptr();
        ffi::av_buffer_unref(&mut (*c).hw_device_ctx);
        (*c).hw_device_ctx = dev.into_raw();
        (*c).get_format = Some(pick_cuda);
    }
}

/// The hwaccel an opened decoder uses ("h264_nvdec"), if any.
pub(crate) fn hwaccel_name(dec: &ff::decoder::Video) -> Option<String> {
    // SAFETY: the decoder context is open and owned by `dec`; `hwaccel` is null or points to a
    // static AVHWAccel whose `name` is a static NUL-terminated string.
    unsafe {
        let h = (*dec.as_ptr()).hwaccel;
        (!h.is_null() && !(*h).name.is_null())
            .then(|| CStr::from_ptr((*h).name).to_string_lossy().into_owned())
    }
}

/// The hw frames context a (CUDA) frame belongs to.
pub(crate) fn frame_hw_frames(frame: &ff::frame::Video) -> Option<HwRef> {
    // SAFETY: the frame is owned by `frame`; hw_frames_ctx is null or a live buffer ref.
    HwRef::new_ref(unsafe { (*frame.as_ptr()).hw_frames_ctx })
}

/// A new CUDA frames context (pool) of `sw_format` frames of `width` x `height` on `device`.
pub(crate) fn new_frames(
    device: &HwRef,
    sw_format: ff::format::Pixel,
    width: u32,
    height: u32,
) -> Result<HwRef, AvFailure> {
    // SAFETY: `device` is a live device context; av_hwframe_ctx_alloc returns null or a new
    // frames-context buffer we own (wrapped at once, so every exit unrefs it); its fields are
    // set before av_hwframe_ctx_init, as the API requires. CUDA pools grow on demand, so no
    // initial size is needed.
    unsafe {
        let raw = NonNull::new(ffi::av_hwframe_ctx_alloc(device.as_ptr()))
            .ok_or_else(|| AvFailure::new(-libc::ENOMEM, "allocating CUDA frames"))?;
        let frames = HwRef(raw);
        let fc = (*frames.as_ptr()).data as *mut ffi::AVHWFramesContext;
        (*fc).format = ffi::AVPixelFormat::AV_PIX_FMT_CUDA;
        (*fc).sw_format = sw_format.into();
        (*fc).width = width as c_int;
        (*fc).height = height as c_int;
        (*fc).initial_pool_size = 0;
        let ret = ffi::av_hwframe_ctx_init(frames.as_ptr());
        if ret < 0 {
            return Err(AvFailure::new(ret, "initialising CUDA frames"));
        }
        Ok(frames)
    }
}

/// Uploads a software frame (already in the pool's sw_format and size) to a new CUDA frame,
/// keeping its timestamps and colour properties.
pub(crate) fn upload(
    frames: &HwRef,
    src: &ff::frame::Video,
) -> Result<ff::frame::Video, AvFailure> {
    let mut dst = ff::frame::Video::empty();
    // SAFETY: `dst` is a freshly allocated empty AVFrame we own; av_hwframe_get_buffer fills
    // it from the live pool; `src` is a valid software frame whose format and size match the
    // pool (the caller converts it first); copy_props only copies metadata.
    unsafe {
        let d = dst.as_mut_ptr();
        let ret = ffi::av_hwframe_get_buffer(frames.as_ptr(), d, 0);
        if ret < 0 {
            return Err(AvFailure::new(ret, "getting a CUDA frame"));
        }
        let ret = ffi::av_hwframe_transfer_data(d, src.as_ptr(), 0);
        if ret < 0 {
            return Err(AvFailure::new(ret, "uploading a frame"));
        }
        let ret = ffi::av_frame_copy_props(d, src.as_ptr());
        if ret < 0 {
            return Err(AvFailure::new(ret, "copying frame properties"));
        }
    }
    Ok(dst)
}

/// Hands a buffer source the hw frames context its CUDA frames come from (before the graph
/// is configured, so scale_cuda finds the device on its input link).
pub(crate) fn set_buffersrc_frames(
    src: &mut ff::filter::Context,
    frames: &HwRef,
) -> Result<(), AvFailure> {
    // SAFETY: av_buffersrc_parameters_alloc returns null or a struct with every field unset;
    // we set only hw_frames_ctx (borrowed: av_buffersrc_parameters_set takes its own
    // reference) on a live buffer-source context, then free the struct itself with av_free.
    unsafe {
        let par = ffi::av_buffersrc_parameters_alloc();
        if par.is_null() {
            return Err(AvFailure::new(-libc::ENOMEM, "buffer source parameters"));
        }
        (*par).hw_frames_ctx = frames.as_ptr();
        let ret = ffi::av_buffersrc_parameters_set(src.as_mut_ptr(), par);
        ffi::av_free(par as *mut c_void);
        if ret < 0 {
            return Err(AvFailure::new(
                ret,
                "setting the buffer source's CUDA frames",
            ));
        }
    }
    Ok(())
}

/// The hw frames context of a configured buffer sink's output (what the encoder gets).
pub(crate) fn buffersink_frames(sink: &ff::filter::Context) -> Option<HwRef> {
    // SAFETY: the sink belongs to a configured graph we hold; the getter returns a borrowed
    // ref (or null), of which we take our own reference.
    HwRef::new_ref(unsafe { ffi::av_buffersink_get_hw_frames_ctx(sink.as_ptr()) })
}

/// Gives an encoder (not yet opened) the hw frames context its CUDA input frames come from.
pub(crate) fn set_encoder_frames(enc: &mut ff::encoder::video::Video, frames: &HwRef) {
    let r = frames.clone();
    // SAFETY: the encoder context is allocated and not opened; hw_frames_ctx takes ownership
    // of the new reference and is unref'd by avcodec_free_context.
    unsafe {
        let c = enc.as_mut_ptr();
        ffi::av_buffer_unref(&mut (*c).hw_frames_ctx);
        (*c).hw_frames_ctx = r.into_raw();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nvdec_decoder_gets_surfaces_for_the_pipeline_within_the_limit() {
        let mut ctx = ff::codec::Context::new();
        size_surfaces(&mut ctx);
        // SAFETY: the context is allocated and owned here.
        let extra = unsafe { (*ctx.as_ptr()).extra_hw_frames };
        assert_eq!(extra, NVDEC_EXTRA_SURFACES);
        // H.264's and HEVC's largest DPB (16) plus one plus these stay under NVDEC's 32.
        assert!(16 + 1 + extra < 32);
    }
}
