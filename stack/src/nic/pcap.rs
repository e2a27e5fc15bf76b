//! Placeholder: filled in by the nic work.
