//! Probes DPDK (>= 22.11) with pkg-config, compiles the C shim with DPDK's full cflags, links.
//!
//! The pkg-config crate drops `-include rte_config.h` and `-march=...` from the cflags, both of
//! which DPDK's headers need, so the cflags are read from `pkg-config --cflags` directly.

use std::process::{exit, Command};

const MIN_VERSION: &str = "22.11";
const INSTALL_HINT: &str = "apt-get install libdpdk-dev pkg-config";

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    exit(1);
}

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=shim/shim.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");

    // Probe (and emit the link flags of `pkg-config --libs libdpdk`).
    let lib = match pkg_config::Config::new().atleast_version(MIN_VERSION).probe("libdpdk") {
        Ok(lib) => lib,
        Err(e) => {
            // pkg-config's own verdict ("Package ... not found", "Requested ... but version ...").
            let text = e.to_string();
            let reason = text
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("Package ") || l.starts_with("Requested "))
                .map(|l| format!(" (pkg-config: {l})"))
                .unwrap_or_default();
            fail(&format!(
                "DPDK >= {MIN_VERSION} (pkg-config package `libdpdk`) not found; install it with \
                 `{INSTALL_HINT}`{reason}"
            ));
        }
    };
    // rte_eth_from_rings lives in the ring PMD, which `--libs` does not list.
    println!("cargo:rustc-link-lib=rte_net_ring");
    // rte_vdev_init (virtual devices created after EAL start) lives in the vdev bus, likewise.
    println!("cargo:rustc-link-lib=rte_bus_vdev");
    println!("cargo:version={}", lib.version);

    let pkg_config = std::env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = match Command::new(&pkg_config).args(["--cflags", "libdpdk"]).output() {
        Ok(out) if out.status.success() => out,
        Ok(out) => fail(&format!(
            "`{pkg_config} --cflags libdpdk` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => fail(&format!("cannot run `{pkg_config}` ({e}); install it with `{INSTALL_HINT}`")),
    };
    let cflags = String::from_utf8_lossy(&output.stdout).into_owned();

    let mut build = cc::Build::new();
    build.file("shim/shim.c").include("shim").define("ALLOW_EXPERIMENTAL_API", None);
    build.flag_if_supported("-Wall").warnings(true);
    // Whitespace-separated, with `-include FILE` as one two-token flag.
    let mut tokens = cflags.split_whitespace();
    while let Some(tok) = tokens.next() {
        if tok == "-include" {
            match tokens.next() {
                Some(file) => {
                    build.flag("-include").flag(file);
                }
                None => fail("`pkg-config --cflags libdpdk` ends with a dangling -include"),
            }
        } else {
            build.flag(tok);
        }
    }
    build.compile("slimtcp_dpdk_shim");
}
