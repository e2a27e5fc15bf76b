//! Window updates when the receive budget recovers (`rx_memory.rs`).
//!
//! While the interface's receive budget runs low, every connection offers at most half the room
//! left, so windows shrink for sockets that did nothing wrong. A socket sends a window update
//! when its own application reads; the others would wait for their peers' zero-window probes,
//! which back off to minutes. So the interface remembers how low the room fell, and each time
//! it has at least doubled since (and grown by [`REOPEN_MIN`]), every connection whose window
//! grew enough to matter (`Connection::window_reopened`) sends an update. The walk touches every
//! connection, but it happens once per doubling of the room, never per packet.

use super::{Interface, SocketHandle};
use crate::nic::Nic;

/// Least growth of the room, in bytes, worth a walk over the connections.
const REOPEN_MIN: usize = 64 * 1024;

impl<N: Nic> Interface<N> {
    /// Called once per poll: tracks the budget's low point; sends window updates once the room
    /// recovered from it.
    pub(super) fn reopen_windows_after_pressure(&mut self) {
        let room = self.rx_budget.room();
        let limit = self.rx_budget.limit();
        let low = match self.rx_room_low {
            Some(low) if room < low => {
                self.rx_room_low = Some(room);
                return;
            }
            Some(low) => low,
            None => {
                if room < limit / 2 {
                    self.rx_room_low = Some(room);
                }
                return;
            }
        };
        if room < low.saturating_mul(2).max(low + REOPEN_MIN) {
            return;
        }
        self.rx_room_low = (room < limit / 2).then_some(room);
        let handles: Vec<SocketHandle> = self.sockets.tcp_handles();
        for h in handles {
            if let Some(sock) = self.sockets.tcp_mut(h) {
                if sock.conn.window_reopened() {
                    self.counters.rx_memory_window_updates += 1;
                    Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
                }
            }
        }
    }
}
