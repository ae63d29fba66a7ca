//! libvmaf (Netflix's VMAF, 2.3.1, linked statically; scripts/build-libvmaf.sh builds it and
//! media/build.rs links it): a scorer that takes pairs of 8-bit 4:2:0 frames and gives back
//! one VMAF score per pair.
//!
//! Why our own declarations rather than a -sys crate: the dozen calls tessera makes are
//! declared here against libvmaf's headers (include/libvmaf/{libvmaf,model,picture}.h), so
//! the only licence in the chain is libvmaf's own (BSD-2-Clause-Patent) and the library is
//! always built optimised, also under a debug build of tessera.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use ffmpeg_next as ff;

/// `VmafConfiguration` (libvmaf.h).
#[repr(C)]
struct Configuration {
    log_level: c_int,
    n_threads: c_uint,
    n_subsample: c_uint,
    cpumask: u64,
}

/// `VmafModelConfig` (model.h).
#[repr(C)]
struct ModelConfig {
    name: *const c_char,
    flags: u64,
}

/// `VmafPicture` (picture.h): planes libvmaf allocates and owns once read.
#[repr(C)]
struct Picture {
    pix_fmt: c_int,
    bpc: c_uint,
    w: [c_uint; 3],
    h: [c_uint; 3],
    stride: [isize; 3],
    data: [*mut c_void; 3],
    ref_: *mut c_void,
}

enum Context {}
enum Model {}

const PIX_FMT_YUV420P: c_int = 1;
const LOG_LEVEL_NONE: c_int = 0;

extern "C" {
    fn vmaf_init(vmaf: *mut *mut Context, cfg: Configuration) -> c_int;
    fn vmaf_model_load(
        model: *mut *mut Model,
        cfg: *mut ModelConfig,
        version: *const c_char,
    ) -> c_int;
    fn vmaf_use_features_from_model(vmaf: *mut Context, model: *mut Model) -> c_int;
    fn vmaf_picture_alloc(
        pic: *mut Picture,
        fmt: c_int,
        bpc: c_uint,
        w: c_uint,
        h: c_uint,
    ) -> c_int;
    fn vmaf_picture_unref(pic: *mut Picture) -> c_int;
    fn vmaf_read_pictures(
        vmaf: *mut Context,
        reference: *mut Picture,
        distorted: *mut Picture,
        index: c_uint,
    ) -> c_int;
    fn vmaf_score_at_index(
        vmaf: *mut Context,
        model: *mut Model,
        score: *mut f64,
        index: c_uint,
    ) -> c_int;
    fn vmaf_model_destroy(model: *mut Model);
    fn vmaf_close(vmaf: *mut Context) -> c_int;
    fn vmaf_version() -> *const c_char;
}

/// The version of the libvmaf linked in (for reports and `tessera capabilities`).
pub(crate) fn version() -> String {
    // SAFETY: vmaf_version returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_ptr(vmaf_version()) }
        .to_string_lossy()
        .into_owned()
}

/// One scoring run: frames go in pairs, in order; `finish` gives one score per pair.
pub(crate) struct Scorer {
    ctx: *mut Context,
    model: *mut Model,
    pairs: u32,
    subsample: u32,
}

impl Scorer {
    /// A scorer with the built-in model `model` (`vmaf_v0.6.1`, `vmaf_4k_v0.6.1`) on
    /// `threads` threads (0: on the calling thread), scoring every `subsample`th pair (1:
    /// each; libvmaf still runs its temporal features on every pair).
    pub(crate) fn new(model: &CStr, threads: u32, subsample: u32) -> Result<Self, String> {
        let subsample = subsample.max(1);
        let mut scorer = Scorer {
            ctx: std::ptr::null_mut(),
            model: std::ptr::null_mut(),
            pairs: 0,
            subsample,
        };
        let cfg = Configuration {
            log_level: LOG_LEVEL_NONE,
            n_threads: threads,
            n_subsample: subsample,
            cpumask: 0,
        };
        let mut model_cfg = ModelConfig {
            name: c"vmaf".as_ptr(),
            flags: 0,
        };
        // SAFETY: the out-pointers are fields of `scorer`, which Drop releases whatever of
        // them was set (null ones are skipped); `model_cfg` and `model` outlive the calls,
        // and libvmaf copies the name it is given.
        unsafe {
            if vmaf_init(&mut scorer.ctx, cfg) != 0 || scorer.ctx.is_null() {
                return Err("libvmaf could not start".into());
            }
            if vmaf_model_load(&mut scorer.model, &mut model_cfg, model.as_ptr()) != 0
                || scorer.model.is_null()
            {
                scorer.model = std::ptr::null_mut();
                return Err(format!("libvmaf has no built-in model {model:?}"));
            }
            if vmaf_use_features_from_model(scorer.ctx, scorer.model) != 0 {
                return Err(format!("libvmaf could not set up model {model:?}"));
            }
        }
        Ok(scorer)
    }

    /// Scores `distorted` against `reference`: both 8-bit yuv420p of one size.
    pub(crate) fn push(
        &mut self,
        reference: &ff::frame::Video,
        distorted: &ff::frame::Video,
    ) -> Result<(), String> {
        let mut r = picture(reference)?;
        let mut d = match picture(distorted) {
            Ok(d) => d,
            Err(e) => {
                // SAFETY: `r` was allocated by vmaf_picture_alloc and never handed over.
                unsafe { vmaf_picture_unref(&mut r) };
                return Err(e);
            }
        };
        // SAFETY: both pictures are allocated and filled; vmaf_read_pictures takes them over
        // (unrefs them) when it succeeds. When it fails, whether it did depends on where
        // (its thread pool may hold them): they are left alone, a picture's worth of memory
        // in a media child whose run ends with the error.
        let rc = unsafe { vmaf_read_pictures(self.ctx, &mut r, &mut d, self.pairs) };
        if rc != 0 {
            return Err(format!("libvmaf refused frame {} (error {rc})", self.pairs));
        }
        self.pairs += 1;
        Ok(())
    }

    /// Flushes the pipeline and returns the score of every pair pushed (every `subsample`th
    /// one), in order.
    pub(crate) fn finish(self) -> Result<Vec<f64>, String> {
        // SAFETY: null pictures are libvmaf's flush call; each index below `pairs` was read.
        unsafe {
            let rc = vmaf_read_pictures(self.ctx, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if rc != 0 {
                return Err(format!("libvmaf could not finish (error {rc})"));
            }
            (0..self.pairs)
                .step_by(self.subsample as usize)
                .map(|i| {
                    let mut score = 0.0;
                    match vmaf_score_at_index(self.ctx, self.model, &mut score, i) {
                        0 => Ok(score),
                        rc => Err(format!("libvmaf has no score for frame {i} (error {rc})")),
                    }
                })
                .collect()
        }
    }
}

impl Drop for Scorer {
    fn drop(&mut self) {
        // SAFETY: each pointer is null or the live object vmaf_model_load/vmaf_init made,
        // released once here.
        unsafe {
            if !self.model.is_null() {
                vmaf_model_destroy(self.model);
            }
            if !self.ctx.is_null() {
                vmaf_close(self.ctx);
            }
        }
    }
}

/// A libvmaf picture holding a copy of `frame`'s three planes.
fn picture(frame: &ff::frame::Video) -> Result<Picture, String> {
    if frame.format() != ff::format::Pixel::YUV420P {
        return Err(format!("frame is {:?}, not yuv420p", frame.format()));
    }
    let mut pic = Picture {
        pix_fmt: 0,
        bpc: 0,
        w: [0; 3],
        h: [0; 3],
        stride: [0; 3],
        data: [std::ptr::null_mut(); 3],
        ref_: std::ptr::null_mut(),
    };
    let (w, h) = (frame.width(), frame.height());
    // SAFETY: vmaf_picture_alloc fills `pic` with planes of the sizes it writes into
    // `pic.w`/`pic.h` and strides `pic.stride` (8 bits: one byte a sample). Each row copied
    // is at most min(plane width, both strides) bytes, within both planes.
    unsafe {
        if vmaf_picture_alloc(&mut pic, PIX_FMT_YUV420P, 8, w, h) != 0 {
            return Err(format!("libvmaf could not allocate a {w}x{h} picture"));
        }
        for p in 0..3 {
            let (pw, ph) = (pic.w[p] as usize, pic.h[p] as usize);
            let (src, src_stride) = (frame.data(p), frame.stride(p));
            let dst_stride = pic.stride[p] as usize;
            let row = pw.min(src_stride).min(dst_stride);
            for y in 0..ph.min(frame.plane_height(p) as usize) {
                let from = &src[y * src_stride..y * src_stride + row];
                let to = (pic.data[p] as *mut u8).add(y * dst_stride);
                std::ptr::copy_nonoverlapping(from.as_ptr(), to, row);
            }
        }
    }
    Ok(pic)
}
