//! Placeholder until the NATS tests land.
