//! End to end over TAP: an application linked with slimtcp-guest (vhost-user transport) ->
//! slimtcp-vhost -> TAP -> the Linux kernel in a namespace made by each test.

mod e2e;

use e2e::Tenant;
use slimtcp_testkit::netns::Netns;

fn tenant(tag: &str) -> Tenant {
    let ifname = Netns::unique_ifname("e2e");
    Tenant::start(tag, e2e::tap_nic(ifname))
}

e2e_tests!(tenant);
