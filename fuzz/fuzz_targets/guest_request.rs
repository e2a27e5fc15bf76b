//! The guest request parser (and the receive-message parser) on arbitrary bytes: no panic, and
//! every accepted frame is canonical (re-emitting it gives the same bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slimtcp_abi::{Request, RequestHeader, RxMessage, VIRTIO_NET_HDR_LEN};

fuzz_target!(|frame: &[u8]| {
    let _ = RequestHeader::parse(frame);
    if let Ok(req) = Request::parse(frame) {
        let mut again = vec![0u8; req.wire_len()];
        assert_eq!(req.emit(&mut again), Ok(req.wire_len()));
        assert_eq!(&again[VIRTIO_NET_HDR_LEN..], &frame[VIRTIO_NET_HDR_LEN..req.wire_len()]);
        let _ = req.check_chain_len(frame.len());
    }
    if let Ok(msg) = RxMessage::parse(frame) {
        let mut again = frame.to_vec();
        assert_eq!(msg.emit(&mut again), Ok(msg.wire_len()));
        assert_eq!(again, frame);
    }
});
