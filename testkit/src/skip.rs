//! Tests that need root and network namespaces: run them, or say loudly that they were skipped.
//!
//! `make test` runs as root and sets `SLIMTCP_REQUIRE_NETNS=1`, which turns a would-be skip into
//! a failure, so CI can never pass by skipping.

use std::io::Write;
use std::path::Path;

/// Set (to anything but `0` or empty) to make missing privileges fail tests instead of skipping.
pub const REQUIRE_ENV: &str = "SLIMTCP_REQUIRE_NETNS";

/// Why namespace tests cannot run here, or `None` if they can.
pub fn netns_unavailable_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Some(format!("not root (euid {euid})"));
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun is missing".to_owned());
    }
    match std::process::Command::new("ip").arg("-V").output() {
        Ok(out) if out.status.success() => None,
        _ => Some("the `ip` command (iproute2) is missing".to_owned()),
    }
}

/// True when running as root with `/dev/net/tun` and iproute2 available.
pub fn is_root_with_netns() -> bool {
    netns_unavailable_reason().is_none()
}

/// Returns true if the test must be skipped, after printing `SKIP <test_name>: <reason>` to
/// stderr (uncaptured, so it shows even for passing tests).
///
/// # Panics
/// When the environment cannot run the test and [`REQUIRE_ENV`] is set.
pub fn skip_unless_netns(test_name: &str) -> bool {
    let Some(reason) = netns_unavailable_reason() else {
        return false;
    };
    let required = std::env::var(REQUIRE_ENV).map(|v| !v.is_empty() && v != "0").unwrap_or(false);
    if required {
        panic!("{test_name} needs root with network namespaces, but {reason} ({REQUIRE_ENV} is set)");
    }
    // Written to the stderr handle, not via eprintln!, so libtest's capture does not hide it.
    let _ = writeln!(std::io::stderr(), "SKIP {test_name}: {reason}");
    true
}

/// Returns from the enclosing test (after a SKIP line) unless namespace tests can run here.
///
/// `require_netns!()` names the test by module path and line; `require_netns!("name")` by `name`.
#[macro_export]
macro_rules! require_netns {
    () => {
        if $crate::skip::skip_unless_netns(concat!(module_path!(), ":", line!())) {
            return;
        }
    };
    ($name:expr) => {
        if $crate::skip::skip_unless_netns($name) {
            return;
        }
    };
}
