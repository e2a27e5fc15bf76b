//! Virtual devices created after the EAL started (`rte_vdev_init`), e.g. one `net_tap` port per
//! test namespace, as `--vdev=` would have created them at start.
//!
//! A driver that creates kernel objects does so in the calling thread's network namespace:
//! `net_tap` creates its TAP interface (and opens the control sockets and, at queue setup, the
//! queue file descriptors it uses later) in the namespace of the thread that creates the device
//! and opens the port. Call both from a thread inside the wanted namespace.

use std::ffi::CString;

use dpdk_sys as sys;

use super::eal::Eal;

/// Why a virtual device could not be created or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VdevError {
    /// The name or the arguments contain a NUL byte.
    #[error("virtual device name or arguments contain a NUL byte: {0:?}")]
    HasNul(String),
    /// The driver refused to create the device.
    #[error("cannot create virtual device {name:?} with {args:?}: {reason}")]
    Create {
        /// Device name (its prefix selects the driver, e.g. `net_tap3`).
        name: String,
        /// Driver arguments, e.g. `iface=slimtap3`.
        args: String,
        /// DPDK's description of the error.
        reason: String,
    },
    /// The device could not be removed.
    #[error("cannot remove virtual device {name:?}: {reason}")]
    Remove {
        /// Device name.
        name: String,
        /// DPDK's description of the error.
        reason: String,
    },
}

fn c_string(s: &str) -> Result<CString, VdevError> {
    CString::new(s).map_err(|_| VdevError::HasNul(s.to_string()))
}

fn reason(rc: i32) -> String {
    sys::strerror(if rc < -1 { -rc } else { sys::errno() })
}

/// Creates virtual device `name` (e.g. `net_tap1`) with driver arguments `args` (e.g.
/// `iface=slimB`); its port is then found by `name` ([`PortConfig::device`]).
///
/// [`PortConfig::device`]: super::PortConfig::device
pub fn create_vdev(eal: &Eal, name: &str, args: &str) -> Result<(), VdevError> {
    let _ = eal;
    let (c_name, c_args) = (c_string(name)?, c_string(args)?);
    // SAFETY: the EAL is running (`eal`); both are valid C strings that DPDK copies.
    let rc = unsafe { sys::rte_vdev_init(c_name.as_ptr(), c_args.as_ptr()) };
    if rc != 0 {
        return Err(VdevError::Create { name: name.to_string(), args: args.to_string(), reason: reason(rc) });
    }
    Ok(())
}

/// Removes virtual device `name` (its port must be closed: drop every NIC of it first).
pub fn remove_vdev(eal: &Eal, name: &str) -> Result<(), VdevError> {
    let _ = eal;
    let c_name = c_string(name)?;
    // SAFETY: the EAL is running; a valid C string; no port of the device is in use (contract).
    let rc = unsafe { sys::rte_vdev_uninit(c_name.as_ptr()) };
    if rc != 0 {
        return Err(VdevError::Remove { name: name.to_string(), reason: reason(rc) });
    }
    Ok(())
}
