//! Linux peers move pattern streams intact, both directions, inside a namespace.

use std::net::SocketAddr;
use std::time::Duration;

use slimtcp_testkit::linux_peer::{
    spawn_tcp_client_recv, spawn_tcp_server_recv, spawn_tcp_server_send, tcp_client_send,
};
use slimtcp_testkit::{require_netns, Netns};

const TIMEOUT: Duration = Duration::from_secs(60);
const LEN: u64 = 8 * 1024 * 1024 + 13;

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

#[test]
fn a_client_stream_reaches_the_server_byte_for_byte() {
    require_netns!("a_client_stream_reaches_the_server_byte_for_byte");
    let ns = Netns::create("slimt-peer").expect("create namespace");
    let (addr, server) = spawn_tcp_server_recv(&ns, any_port(), TIMEOUT).expect("listen");
    let sent = tcp_client_send(&ns, addr, LEN, 11, TIMEOUT).expect("client sends");
    let received = server.join().expect("server receives");
    assert!(sent.matches_pattern(11, LEN));
    assert_eq!(received, sent);
}

#[test]
fn a_server_stream_reaches_the_client_byte_for_byte() {
    require_netns!("a_server_stream_reaches_the_client_byte_for_byte");
    let ns = Netns::create("slimt-peer").expect("create namespace");
    let (addr, server) = spawn_tcp_server_send(&ns, any_port(), LEN, 12, TIMEOUT).expect("listen");
    let client = spawn_tcp_client_recv(&ns, addr, TIMEOUT).expect("spawn client");
    let received = client.join().expect("client receives");
    assert_eq!(server.join().expect("server sends"), received);
    assert!(received.matches_pattern(12, LEN));
}

#[test]
fn a_server_nobody_connects_to_times_out() {
    require_netns!("a_server_nobody_connects_to_times_out");
    let ns = Netns::create("slimt-peer").expect("create namespace");
    let (_, server) = spawn_tcp_server_recv(&ns, any_port(), Duration::from_millis(200)).expect("listen");
    assert!(server.join().is_err());
}
