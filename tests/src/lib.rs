//! Cross-crate and end-to-end tests of informer-gen live in `tests/`; this crate holds shared helpers.
