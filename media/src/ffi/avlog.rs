//! FFmpeg log capture: while a `LogCapture` is alive, warnings and errors logged on this
//! thread are collected instead of printed, so a failed call can be classified by its words
//! (NVENC and the CUDA loader put the useful part only in the log).

use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::Once;

use ff::ffi;
use ffmpeg_next as ff;
use libc::{c_char, c_int, c_void};

thread_local! {
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}
const CAPTURE_LIMIT: usize = 16 * 1024;

/// While alive, FFmpeg's warnings and errors on this thread are collected (for `AvFailure`)
/// instead of printed. Nested captures share the outer one.
pub(crate) struct LogCapture {
    owner: bool,
}

impl LogCapture {
    pub(crate) fn start() -> LogCapture {
        static INSTALL: Once = Once::new();
        // SAFETY: `log_callback` has the callback's exact signature, never unwinds, and
        // forwards to FFmpeg's default callback whenever it is not capturing.
        INSTALL.call_once(|| unsafe { ffi::av_log_set_callback(Some(log_callback)) });
        let owner = CAPTURE.with(|c| {
            let mut c = c.borrow_mut();
            let fresh = c.is_none();
            if fresh {
                *c = Some(String::new());
            }
            fresh
        });
        LogCapture { owner }
    }
}

impl Drop for LogCapture {
    fn drop(&mut self) {
        if self.owner {
            let _ = CAPTURE.try_with(|c| c.borrow_mut().take());
        }
    }
}

/// Forgets what was captured so far on this thread. Called right before an FFmpeg call
/// whose failure is classified, so only that call's own lines decide (text from earlier in
/// the segment, such as a fallen-back NVDEC init, must not).
pub(crate) fn clear_log() {
    let _ = take_log();
}

/// The text captured on this thread since the last take.
pub(crate) fn take_log() -> String {
    CAPTURE
        .try_with(|c| match c.try_borrow_mut() {
            Ok(mut c) => c.as_mut().map(std::mem::take).unwrap_or_default(),
            Err(_) => String::new(),
        })
        .unwrap_or_default()
}

unsafe extern "C" fn log_callback(
    avcl: *mut c_void,
    level: c_int,
    fmt: *const c_char,
    vl: *mut ffi::__va_list_tag,
) {
    let capturing = level <= ffi::AV_LOG_WARNING
        && CAPTURE
            .try_with(|c| matches!(c.try_borrow().as_deref(), Ok(Some(_))))
            .unwrap_or(false);
    if !capturing {
        // SAFETY: the arguments are FFmpeg's own, passed on unchanged and unused by us.
        unsafe { ffi::av_log_default_callback(avcl, level, fmt, vl) };
        return;
    }
    let mut prefix: c_int = CAPTURE
        .try_with(|c| match c.try_borrow() {
            Ok(s) => s
                .as_deref()
                .map_or(1, |s| c_int::from(s.is_empty() || s.ends_with('\n'))),
            Err(_) => 1,
        })
        .unwrap_or(1);
    let mut buf = [0 as c_char; 1024];
    // SAFETY: the va_list is consumed once, here (not forwarded); `buf` has the length given
    // and av_log_format_line2 always NUL-terminates within it.
    let line = unsafe {
        ffi::av_log_format_line2(avcl, level, fmt, vl, buf.as_mut_ptr(), 1024, &mut prefix);
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    };
    let _ = CAPTURE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            if let Some(s) = c.as_mut() {
                if s.len() + line.len() > CAPTURE_LIMIT {
                    // Keep the newest text: a failure's words come last.
                    let mut cut = s.len() / 2;
                    while !s.is_char_boundary(cut) {
                        cut += 1;
                    }
                    s.drain(..cut);
                }
                s.push_str(&line);
            }
        }
    });
}
