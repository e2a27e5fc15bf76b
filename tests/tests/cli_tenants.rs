//! Several tenants in one `slimtcp-vhost` process, configured on the command line: two `--tenant`
//! specs, each with its own socket, TAP interface, subnet and worker. Two guest-library
//! instances attach, one per socket, and talk to a Linux echo server through their own TAP at
//! the same time; each connection arrives from its own tenant's address.

mod e2e;

use e2e::namespace_and_dir;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::time::Duration;

use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_system_tests::slimtcp_vhost_bin;
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;

fn attach(socket: &Path) -> GuestSockets {
    let up = slimtcp_testkit::wait::wait_for(Duration::from_secs(20), || socket.exists());
    assert!(up, "the backend did not create {}", socket.display());
    GuestSockets::connect_vhost_user(socket, GuestConfig::default()).expect("guest attaches")
}

/// Echoes 256 KiB of stream `seed` in 4 KiB messages through `server`; returns the address the
/// guest was told in hello.
fn echo_through(api: &mut GuestSockets, server: SocketAddrV4, seed: u64) -> Ipv4Addr {
    e2e::echo_messages(api, server, seed, 64, 4096);
    api.hello_info().addr
}

#[test]
fn two_tenants_from_the_command_line_serve_two_guests_at_once() {
    slimtcp_testkit::require_netns!();
    let (ns, dir) = namespace_and_dir("tenants");
    let (sock_a, sock_b) = (dir.0.join("a.sock"), dir.0.join("b.sock"));
    let (tap_a, tap_b) = (Netns::unique_ifname("tna"), Netns::unique_ifname("tnb"));
    let spec_a =
        format!("name=alpha,socket={},tap={tap_a},ip=10.71.1.2/24,host-ip=10.71.1.1/24", sock_a.display());
    let spec_b = format!(
        "name=beta,socket={},tap={tap_b},ip=10.71.2.2/24,host-ip=10.71.2.1/24,mac=02:00:00:00:71:02,queues=2",
        sock_b.display()
    );
    let backend = slimtcp_vhost_bin();
    let _backend = ns
        .spawn_cmd(&[backend.to_str().expect("utf-8 path"), "--tenant", &spec_a, "--tenant", &spec_b])
        .expect("backend process");

    // One Linux echo server for both tenants, in the namespace, on every address.
    let (_, server) = linux_peer::spawn_tcp_echo_server(
        &ns,
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 7000)),
        2,
        Duration::from_secs(60),
    )
    .expect("echo server");

    let mut a = attach(&sock_a);
    let mut b = attach(&sock_b);
    let ta =
        std::thread::spawn(move || echo_through(&mut a, SocketAddrV4::new([10, 71, 1, 1].into(), 7000), 1));
    let tb =
        std::thread::spawn(move || echo_through(&mut b, SocketAddrV4::new([10, 71, 2, 1].into(), 7000), 2));
    let own_a = ta.join().expect("tenant alpha's guest");
    let own_b = tb.join().expect("tenant beta's guest");
    assert_eq!(
        (own_a, own_b),
        (Ipv4Addr::new(10, 71, 1, 2), Ipv4Addr::new(10, 71, 2, 2)),
        "hello tells each its own"
    );
    let mut peers: Vec<IpAddr> = server.join().expect("echo server").iter().map(SocketAddr::ip).collect();
    peers.sort();
    let want: [IpAddr; 2] = [Ipv4Addr::new(10, 71, 1, 2).into(), Ipv4Addr::new(10, 71, 2, 2).into()];
    assert_eq!(peers, want, "each from its own tenant");
}

#[test]
fn a_tenants_tap_and_host_address_are_there_before_a_vmm_and_after_it() {
    slimtcp_testkit::require_netns!();
    let (ns, dir) = namespace_and_dir("tenantnic");
    let sock = dir.0.join("t.sock");
    let tap = Netns::unique_ifname("tnn");
    let spec = format!("name=early,socket={},tap={tap},ip=10.71.3.2/24,host-ip=10.71.3.1/24", sock.display());
    let backend = slimtcp_vhost_bin();
    let _backend =
        ns.spawn_cmd(&[backend.to_str().expect("utf-8 path"), "--tenant", &spec]).expect("backend process");
    let up = slimtcp_testkit::wait::wait_for(Duration::from_secs(20), || sock.exists());
    assert!(up, "the backend did not create {}", sock.display());
    let has_host_address = || {
        ns.exec_ok(&["ip", "-4", "-o", "addr", "show", "dev", &tap])
            .is_ok_and(|out| out.contains("10.71.3.1/24"))
    };
    assert!(has_host_address(), "the TAP and its host address exist before any VMM connects");
    // A host service binds the host address now, before the VM is there.
    let host = SocketAddrV4::new([10, 71, 3, 1].into(), 7000);
    let (_, server) =
        linux_peer::spawn_tcp_echo_server(&ns, SocketAddr::V4(host), 2, Duration::from_secs(60))
            .expect("a server on the host address");
    // Two VMM connections in turn, on the same NIC.
    for seed in [3, 4] {
        let mut guest = attach(&sock);
        echo_through(&mut guest, host, seed);
        drop(guest);
        assert!(has_host_address(), "the TAP outlives the VMM connection");
    }
    assert_eq!(server.join().expect("echo server").len(), 2);
}
