//! What the system tests (`tests/tests/*.rs`: the backend end to end and the real-VM tier) share
//! about the build they run in: the workspace's root, and the binaries of the workspace's other
//! crates.
//!
//! Cargo sets `CARGO_BIN_EXE_<name>` only for the tested package's own binaries; `slimtcp-vhost`
//! and `slimtcp-perf` belong to other packages, so the tests find them beside their own build
//! ([`workspace_bin`]). `cargo build --workspace` builds them, as `make test` does before testing.
//!
//! Std only: scripts/build-guest-apps.sh builds this package's guest app (`slimtcp-vm-guest`)
//! statically, and this library with it.

use std::path::{Path, PathBuf};

pub mod iperf3;

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The running test's build directory, `target/<profile>`: the binaries of the workspace are
/// there, libraries and test binaries in its `deps/`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().and_then(Path::parent).expect("target profile directory").to_path_buf()
}

/// A binary of another workspace crate in this build ([`profile_dir`]); panics, saying how to
/// build it, if it is missing.
pub fn workspace_bin(name: &str) -> PathBuf {
    let bin = profile_dir().join(name);
    assert!(
        bin.exists(),
        "{} is missing: build the workspace first (cargo build --release --workspace, or make test)",
        bin.display()
    );
    bin
}

/// The backend binary, `slimtcp-vhost` ([`workspace_bin`]).
pub fn slimtcp_vhost_bin() -> PathBuf {
    workspace_bin("slimtcp-vhost")
}
