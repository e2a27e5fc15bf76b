//! End to end over TAP: an application linked with slimtcp-guest (vhost-user transport) ->
//! slimtcp-vhost -> TAP -> the Linux kernel in a namespace made by each test.

mod e2e;

use e2e::Tenant;
use slimtcp_testkit::netns::Netns;
use slimtcp_testkit::require_netns;

fn tenant(tag: &str) -> Tenant {
    let ifname = Netns::unique_ifname("e2e");
    Tenant::start(tag, e2e::tap_nic(ifname))
}

#[test]
fn echo_round_trips() {
    require_netns!();
    let t = tenant("echo");
    let mut api = t.guest();
    e2e::echo(&mut api, &t.ns);
    drop(api);
    t.finish();
}

#[test]
fn hundred_megabytes_each_way() {
    require_netns!();
    let t = tenant("bulk");
    let mut api = t.guest();
    e2e::guest_to_linux(&mut api, &t.ns, 100_000_000);
    e2e::linux_to_guest(&mut api, &t.ns, 100_000_000);
    drop(api);
    t.finish();
}

#[test]
fn linux_client_reaches_a_guest_listener() {
    require_netns!();
    let t = tenant("listen");
    let mut api = t.guest();
    e2e::linux_client_to_guest_listener(&mut api, &t.ns, 10_000_000);
    drop(api);
    t.finish();
}

#[test]
fn thousand_concurrent_connections() {
    require_netns!();
    let t = tenant("many");
    let mut api = t.guest();
    e2e::many_connections(&mut api, &t.ns, 1000, 16 * 1024);
    drop(api);
    t.finish();
}
