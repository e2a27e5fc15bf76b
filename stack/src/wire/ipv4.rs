//! Placeholder: filled in by the wire work.
