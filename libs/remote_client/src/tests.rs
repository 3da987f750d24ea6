//! Host tests of the client against in-process servers on a simulated net ([`crate::sim`]).

extern crate std;

use alloc::boxed::Box;
use alloc::vec::Vec;

use net_client::Session;
use net_interface::{Endpoint, Ipv4Addr};

use crate::sim::{self, Faults, Net, Peer};

const CLIENT: Ipv4Addr = Ipv4Addr([10, 0, 0, 1]);

fn server(n: u8) -> Endpoint {
    Endpoint { addr: Ipv4Addr([10, 0, 0, 1 + n]), port: 7100 }
}

/// A peer that answers every datagram with itself.
struct Echo;

impl Peer for Echo {
    fn datagram(
        &mut self,
        _: u64,
        from: Endpoint,
        payload: &[u8],
        out: &mut Vec<(Endpoint, Vec<u8>)>,
    ) {
        out.push((from, payload.to_vec()));
    }
    fn poll(&mut self, _: u64, _: &mut Vec<(Endpoint, Vec<u8>)>) {}
    fn next_poll(&self) -> Option<u64> {
        None
    }
}

#[test]
fn the_simulated_net_delivers_loses_and_duplicates_by_its_seed() {
    let faults =
        Faults { loss: 100, dup: 50, reorder: 200, latency_ns: 50_000, jitter_ns: 200_000 };
    let net = Net::new(7, faults);
    Net::add_peer(&net, server(1), Box::new(Echo));
    let mut s = Session::new(Net::transport(&net, CLIENT));
    s.open(5000).unwrap();
    let (mut answered, mut extra) = (0, 0);
    for i in 0..400u32 {
        s.send(server(1), &i.to_le_bytes()).unwrap();
        let deadline = sim::now() + 1_000_000;
        while let Some(got) = s.receive_until(deadline, |d| d.payload.to_vec()).unwrap() {
            if got == i.to_le_bytes() {
                answered += 1;
                break;
            }
            extra += 1;
        }
    }
    let n = net.borrow();
    // Each ping crosses the wire twice: about 81% come back.
    assert!((280..=360).contains(&answered), "{answered} answered");
    assert!(n.lost > 40 && n.duplicated > 10, "lost {} duplicated {}", n.lost, n.duplicated);
    assert!(extra > 0, "no late or duplicate answers");
    assert!(sim::now() > 400 * 100_000);
}
