//! UDP sockets.
