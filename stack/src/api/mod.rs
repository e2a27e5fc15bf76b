//! Socket API for applications.
