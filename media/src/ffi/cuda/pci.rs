//! Which card a CUDA device context opened, by its PCI bus id, read from the driver.
//!
//! Why: the worker books a card by NVML index and hands the child a CUDA ordinal (by PCI bus
//! order, `CUDA_DEVICE_ORDER=PCI_BUS_ID`); nothing else confirms that the two name the same
//! card, and a mismatch would put sessions on a card whose budget was not booked (second GPU
//! review, finding 9). FFmpeg loads libcuda.so.1 itself and does not expose its function
//! table, so the four driver calls are looked up in the already-loaded library
//! (`RTLD_NOLOAD`: never a second load).

use std::ffi::{c_char, c_int, c_void, CStr};

use super::{ffi, HwRef};

type CtxPush = unsafe extern "C" fn(*mut c_void) -> c_int;
type CtxPop = unsafe extern "C" fn(*mut *mut c_void) -> c_int;
type CtxGetDevice = unsafe extern "C" fn(*mut c_int) -> c_int;
type DeviceGetPciBusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;

/// The PCI bus id ("0000:5E:00.0") of the card `device` (a CUDA device context) is on;
/// `None` when the driver is not loaded or does not say.
pub(crate) fn pci_bus_id(device: &HwRef) -> Option<String> {
    // SAFETY: dlopen with RTLD_NOLOAD only returns a handle to a library already loaded (by
    // FFmpeg's CUDA loader, for the context we hold), and we close that handle again. Each
    // symbol is checked non-null and has the C signature of the CUDA driver API (cuda.h,
    // the `_v2` entry points FFmpeg uses). `device` is a live CUDA device context: its data
    // is an AVHWDeviceContext whose hwctx is an AVCUDADeviceContext with a valid cuda_ctx.
    // The context is pushed around the one call that needs it and popped again, as FFmpeg
    // does; the id is written into our buffer, NUL-terminated within its length.
    unsafe {
        let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if lib.is_null() {
            return None;
        }
        let sym = |name: &CStr| libc::dlsym(lib, name.as_ptr());
        let (push, pop, get, bus) = (
            sym(c"cuCtxPushCurrent_v2"),
            sym(c"cuCtxPopCurrent_v2"),
            sym(c"cuCtxGetDevice"),
            sym(c"cuDeviceGetPCIBusId"),
        );
        let found = [push, pop, get, bus].iter().all(|p| !p.is_null());
        let id = found.then(|| {
            let push: CtxPush = std::mem::transmute(push);
            let pop: CtxPop = std::mem::transmute(pop);
            let get: CtxGetDevice = std::mem::transmute(get);
            let bus: DeviceGetPciBusId = std::mem::transmute(bus);
            let dev_ctx = (*device.as_ptr()).data as *const ffi::AVHWDeviceContext;
            let cuda = (*dev_ctx).hwctx as *const ffi::AVCUDADeviceContext;
            if push((*cuda).cuda_ctx as *mut c_void) != 0 {
                return None;
            }
            let mut ordinal: c_int = -1;
            let got = get(&mut ordinal);
            let mut popped = std::ptr::null_mut();
            pop(&mut popped);
            if got != 0 || ordinal < 0 {
                return None;
            }
            let mut buf = [0 as c_char; 32];
            if bus(buf.as_mut_ptr(), buf.len() as c_int, ordinal) != 0 {
                return None;
            }
            Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
        });
        libc::dlclose(lib);
        id.flatten()
    }
}
