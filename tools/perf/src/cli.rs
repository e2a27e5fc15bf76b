//! The command line as typed: DPDK EAL arguments, `--`, then the paper's `eqds-tcp-perf`
//! options plus SlimTCP's extensions. [`crate::config`] turns it into a validated run.

use std::process::ExitCode;

use clap::Parser;
use slimtcp::report::usage_error_line;

/// The text after the option list in `--help`.
const AFTER_HELP: &str = "\
Command line: [DPDK EAL ARGS --] OPTIONS. Everything before the first `--` goes to the DPDK EAL
unchanged (as with the paper's eqds-tcp-perf, e.g. `-l 0,1 -a 0000:3b:00.0 --`); without a `--`
all arguments are options and the EAL gets none.

Roles: `--listen --bind-port P` receives; `--connect-ip IP --connect-port P` sends over
`--connections N` connections. `--nic memwire` runs both in one process on an in-memory link
(sender 10.0.0.1, receiver 10.0.0.2, both SlimTCP). Goodput is counted by the receiver (bytes
read x 8 / time); a sender alone counts bytes the stack accepted. With `--udp` every connection is a
UDP socket sending datagrams of `--mss` payload bytes; a receiver alone ends 1 s after data stopped.

Output: `pps=<bps/8/mss>; bps=<bps>; connections=<n>;` once a second (on stderr with --json), then
a summary line, or with --json one JSON object on stdout.";

/// slimtcp-perf: bulk TCP goodput between SlimTCP stacks (or the Linux kernel), accepting the
/// paper's eqds-tcp-perf arguments.
#[derive(Debug, Parser)]
#[command(name = "slimtcp-perf", version, after_help = AFTER_HELP)]
pub struct Args {
    /// DPDK port (number or device name) for `--nic dpdk`.
    #[arg(long, value_name = "N")]
    pub iface: Option<String>,
    /// This stack's IPv4 address (optionally ADDR/PREFIX; default prefix /24).
    #[arg(long, value_name = "IP")]
    pub bind_ip: Option<String>,
    /// This stack's MAC address.
    #[arg(long, value_name = "MAC")]
    pub bind_eth: Option<String>,
    /// Frames per receive/transmit burst of the worker.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub burst: usize,
    /// TCP workload (the default).
    #[arg(long, conflicts_with = "udp")]
    pub tcp: bool,
    /// UDP workload: datagrams of `--mss` payload bytes, sent as fast as the stack takes them.
    #[arg(long)]
    pub udp: bool,
    /// A neighbour, IP:MAC (repeatable). SlimTCP resolves neighbours with ARP; entries are checked
    /// and used to warn only.
    #[arg(long, value_name = "IP:MAC")]
    pub arp: Vec<String>,
    /// MSS to advertise and send (1..=1460; SlimTCP needs at least 64).
    #[arg(long, value_name = "BYTES", default_value_t = 1460)]
    pub mss: u32,
    /// Window-scale shift to offer (0..=14; default: the stack's).
    #[arg(long, value_name = "SHIFT")]
    pub win_scale: Option<u32>,
    /// Receive: listen for connections.
    #[arg(long)]
    pub listen: bool,
    /// Port to listen on (receiver).
    #[arg(long, value_name = "PORT")]
    pub bind_port: Option<u16>,
    /// Address to connect to (sender).
    #[arg(long, value_name = "IP")]
    pub connect_ip: Option<String>,
    /// Port to connect to (sender).
    #[arg(long, value_name = "PORT")]
    pub connect_port: Option<u16>,
    /// Connections to open (sender; a receiver given it stops once that many have ended).
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Run time in seconds (the paper's name; same as --duration).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,

    /// Extension: the NIC: `dpdk` (default, as in the paper; needs the `dpdk` build feature),
    /// `tap:IFNAME`, `memwire` (sender and receiver in this process), `guest:SOCKET_PATH`
    /// (the guest library attached to a slimtcp-vhost backend over vhost-user), or `pci` /
    /// `pci:DDDD:BB:DD.F` (the guest library on the slimtcp-vhost device inside a VM).
    #[arg(long, value_name = "NIC", default_value = "dpdk")]
    pub nic: String,
    /// Extension: `two-core` (an application thread and a worker thread) or `single` (one thread
    /// runs both). Default: two-core when this machine has at least 3 cores, else single.
    #[arg(long, value_name = "MODE")]
    pub runtime: Option<String>,
    /// Extension: send with alloc_tx/send_zc and receive with recv_zc instead of copying.
    #[arg(long)]
    pub zero_copy: bool,
    /// Extension: every socket's send and receive buffers: `split` (the default: 64 MiB over the
    /// connections, within 16-256 KiB each), `stack` (none set: each stack's own; Linux tunes
    /// its own), or BYTES (4096..=16777216)
    #[arg(long, value_name = "SIZE", default_value = "split")]
    pub socket_buffer: String,
    /// Extension: `--nic memwire` offers checksum offload (the link fills and verifies checksums
    /// where anything needs them, as a NIC would; nothing does here), and both stacks use it.
    #[arg(long)]
    pub checksum_offload: bool,
    /// Extension: `--nic tap:IFNAME` without the TAP's checksum offload (no virtio-net header:
    /// the stack computes and verifies every checksum; by default the kernel fills and verifies
    /// TCP/UDP checksums).
    #[arg(long, conflicts_with = "checksum_offload")]
    pub no_checksum_offload: bool,
    /// Extension: measured run time in seconds (default 10 for a sender; a receiver alone runs
    /// until its connections end).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Extension: print one JSON object at the end (progress lines go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Extension: the same workload over the Linux kernel's sockets.
    #[arg(long)]
    pub kernel: bool,
}

/// Splits the process arguments (without the program name) at the first `--`: the EAL's
/// arguments, then ours. Without a `--`, everything is ours.
pub fn split_eal(args: Vec<String>) -> (Vec<String>, Vec<String>) {
    match args.iter().position(|a| a == "--") {
        Some(i) => {
            let mut eal = args;
            let ours = eal.split_off(i + 1);
            eal.pop();
            (eal, ours)
        }
        None => (Vec::new(), args),
    }
}

/// Exit code for bad arguments (every binary of this crate).
pub const EXIT_USAGE: u8 = 2;

/// Parses `program`'s arguments (`args`, without the program name) into `A`; on `--help` or
/// `--version` prints them and gives `Err(0)`, on a usage error prints one line on stderr and
/// gives `Err(EXIT_USAGE)`.
pub fn parse_or_exit<A: Parser>(
    program: &str,
    args: impl IntoIterator<Item = String>,
) -> Result<A, ExitCode> {
    match A::try_parse_from(std::iter::once(program.to_owned()).chain(args)) {
        Ok(args) => Ok(args),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{program}: error: {} (see --help)", usage_error_line(&e.to_string()));
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn arguments_before_the_first_double_dash_belong_to_the_eal() {
        let (eal, ours) = split_eal(strings(&["-l", "0,1", "--", "--tcp", "--", "x"]));
        assert_eq!(eal, strings(&["-l", "0,1"]));
        assert_eq!(ours, strings(&["--tcp", "--", "x"]));
    }

    #[test]
    fn without_a_double_dash_everything_is_ours() {
        let (eal, ours) = split_eal(strings(&["--nic", "memwire"]));
        assert!(eal.is_empty());
        assert_eq!(ours, strings(&["--nic", "memwire"]));
    }
}
