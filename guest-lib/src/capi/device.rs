//! Devices and contexts: `slim_device_open` attaches to a device (the string `DeviceSpec`
//! parses) and sets up its queue pairs; `slim_device_take` turns one pair into a context, the
//! handle every socket call takes, for one thread at a time. `slim_open` is the one-pair
//! shortcut.

use std::ffi::{c_char, c_int};

use super::args;
use super::entry::guarded;
use super::error::CapiError;
use super::types::SlimConfig;
use crate::{DeviceSpec, GuestConfig, GuestDevice, GuestSockets};

/// An attached device whose queue pairs become contexts (opaque to C).
#[derive(Debug)]
pub struct SlimDevice {
    dev: GuestDevice,
}

/// One queue pair's socket API (opaque to C): sockets, epoll sets and zero-copy buffers
/// belong to the context they came from. Use a context from one thread at a time.
#[derive(Debug)]
pub struct SlimCtx {
    api: GuestSockets,
}

impl SlimCtx {
    /// A context over a socket API built in Rust (say, over a custom transport), for C code
    /// to use; C frees it with `slim_ctx_close`.
    pub fn into_raw(api: GuestSockets) -> *mut SlimCtx {
        Box::into_raw(Box::new(SlimCtx { api }))
    }
}

/// The socket API behind a context argument.
///
/// # Safety
/// `ctx` is NULL or a live context from this library, not used by another thread meanwhile.
pub(crate) unsafe fn api<'a>(ctx: *mut SlimCtx) -> Result<&'a mut GuestSockets, CapiError> {
    // SAFETY: forwarded from the caller.
    Ok(&mut unsafe { args::get_mut(ctx, "ctx") }?.api)
}

/// The configuration `cfg` points to (NULL: the defaults), checked.
///
/// # Safety
/// `cfg` is NULL or points to a valid `SlimConfig`.
unsafe fn config(cfg: *const SlimConfig) -> Result<GuestConfig, CapiError> {
    // SAFETY: forwarded from the caller; `as_ref` handles NULL.
    let cfg = match unsafe { cfg.as_ref() } {
        Some(c) => GuestConfig::from(c),
        None => GuestConfig::default(),
    };
    cfg.validate().map_err(CapiError::Config)?;
    Ok(cfg)
}

/// Parses `device` and attaches with `cfg`.
///
/// # Safety
/// As for [`slim_device_open`].
unsafe fn open(device: *const c_char, cfg: GuestConfig) -> Result<GuestDevice, CapiError> {
    // SAFETY: forwarded from the caller.
    let text = unsafe { args::string(device, "device") }?;
    let spec: DeviceSpec = text.parse().map_err(CapiError::Device)?;
    GuestDevice::open(&spec, cfg).map_err(|source| CapiError::Open { device: text.to_owned(), source })
}

/// Fills `cfg` with the defaults (64 MiB of memory, 1024-entry queues, one queue pair,
/// 8 KiB receive buffers, a 10 s hello timeout). Returns 0, or -EINVAL when `cfg` is NULL.
///
/// # Safety
/// `cfg` is NULL or points to writable memory for a `struct slim_config`.
#[no_mangle]
pub unsafe extern "C" fn slim_config_init(cfg: *mut SlimConfig) -> c_int {
    guarded("slim_config_init", || {
        // SAFETY: the caller guarantees `cfg` is NULL or valid.
        let out = unsafe { args::get_mut(cfg, "cfg") }?;
        *out = SlimConfig::from(&GuestConfig::default());
        Ok(0)
    })
}

/// Attaches to `device` (`"pci"`, `"pci:DDDD:BB:DD.F"` inside a VM, `"vhost-user:PATH"` on
/// the host) and sets up `cfg->queue_pairs` queue pairs (`cfg` NULL: the defaults). Returns the
/// device, or NULL with `errno` set and `slim_last_error` telling why. Close it with
/// `slim_device_close` (the contexts taken from it stay usable).
///
/// # Safety
/// `device` is NULL or a NUL-terminated string; `cfg` is NULL or a valid `struct slim_config`.
#[no_mangle]
pub unsafe extern "C" fn slim_device_open(device: *const c_char, cfg: *const SlimConfig) -> *mut SlimDevice {
    guarded("slim_device_open", || {
        // SAFETY: forwarded from the caller.
        let cfg = unsafe { config(cfg) }?;
        // SAFETY: forwarded from the caller.
        let dev = unsafe { open(device, cfg) }?;
        Ok(Box::into_raw(Box::new(SlimDevice { dev })))
    })
}

/// How many queue pairs the device set up (taken or not), or a negative errno.
///
/// # Safety
/// `dev` is NULL or a live device from `slim_device_open`.
#[no_mangle]
pub unsafe extern "C" fn slim_device_queue_pairs(dev: *const SlimDevice) -> c_int {
    guarded("slim_device_queue_pairs", || {
        // SAFETY: forwarded from the caller.
        let d = unsafe { args::get(dev, "dev") }?;
        Ok(c_int::try_from(d.dev.queue_pairs()).unwrap_or(c_int::MAX))
    })
}

/// A context over queue pair `pair` (each pair once), ready for sockets: move it to the
/// thread that will use it. NULL with `errno` set on failure.
///
/// # Safety
/// `dev` is NULL or a live device, not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn slim_device_take(dev: *mut SlimDevice, pair: c_int) -> *mut SlimCtx {
    guarded("slim_device_take", || {
        // SAFETY: forwarded from the caller.
        let d = unsafe { args::get_mut(dev, "dev") }?;
        let pair = args::count(pair, "pair")?;
        let api = d.dev.take(pair).map_err(|source| CapiError::Take { pair, source })?;
        Ok(SlimCtx::into_raw(api))
    })
}

/// Releases a device; pairs not taken are freed, contexts already taken live on. NULL is
/// ignored.
///
/// # Safety
/// `dev` is NULL or a live device from `slim_device_open`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn slim_device_close(dev: *mut SlimDevice) {
    guarded("slim_device_close", || {
        if !dev.is_null() {
            // SAFETY: the caller gives back a pointer from `Box::into_raw` in `slim_device_open`.
            drop(unsafe { Box::from_raw(dev) });
        }
        Ok(())
    })
}

/// The one-pair shortcut: attaches to `device` with `cfg` (NULL: the defaults; at least one
/// queue pair is set up) and returns a context over pair 0, or NULL with `errno` set.
///
/// # Safety
/// As for `slim_device_open`.
#[no_mangle]
pub unsafe extern "C" fn slim_open(device: *const c_char, cfg: *const SlimConfig) -> *mut SlimCtx {
    guarded("slim_open", || {
        // SAFETY: forwarded from the caller.
        let cfg = unsafe { config(cfg) }?;
        let cfg = GuestConfig { queue_pairs: cfg.queue_pairs.max(1), ..cfg };
        // SAFETY: forwarded from the caller.
        let mut dev = unsafe { open(device, cfg) }?;
        let api = dev.take(0).map_err(|source| CapiError::Take { pair: 0, source })?;
        Ok(SlimCtx::into_raw(api))
    })
}

/// Releases a context: its open sockets are closed (best effort, as by `slim_close`) and its
/// epoll sets freed. Zero-copy buffers still held stay valid until released. NULL is ignored.
///
/// # Safety
/// `ctx` is NULL or a live context, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn slim_ctx_close(ctx: *mut SlimCtx) {
    guarded("slim_ctx_close", || {
        if !ctx.is_null() {
            // SAFETY: the caller gives back a pointer from `Box::into_raw` in this module.
            drop(unsafe { Box::from_raw(ctx) });
        }
        Ok(())
    })
}
