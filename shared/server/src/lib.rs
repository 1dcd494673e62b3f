//! The webhook server every Portcullis webhook runs on.
//!
//! One way to do each piece of plumbing, shared by the injector and the
//! validator: HTTPS with rustls (TLS 1.2+) and a certificate resolver that
//! is swapped atomically ([`tls`]), fed by the cert-manager
//! ([`cert_manager`]), files or a self-signed certificate
//! ([`certificates`]); an
//! HTTP/1.1 server with header and request time limits and a shutdown
//! that drains before it closes, every answer telling its client to close
//! the connection, so that no request is lost ([`serve`]); the webhook
//! handler that owns the AdmissionReview protocol, tracing and metrics
//! ([`webhook`]); the plain-HTTP admin port with `/healthz`, `/readyz` and
//! `/metrics` ([`admin`]); polling reload of mounted files that survives the
//! kubelet's `..data` symlink swap ([`watch`]); and the shutdown signal
//! ([`shutdown`]). Decisions are not made here: a service hands the
//! handler a pure function from request to [`portcullis_admission::Decision`].
//! Neither is anything else a webhook server does not need: how a binary
//! starts and ends is `portcullis-process`'s.

#![forbid(unsafe_code)]

pub mod admin;
pub mod args;
pub mod capture;
pub mod cert_manager;
pub mod certificates;
pub mod metrics;
pub mod run;
pub mod serve;
pub mod shutdown;
pub mod tls;
pub mod watch;
pub mod webhook;

pub use args::{AdminArgs, ResourceArgs, ServeArgs, TlsArgs};
pub use metrics::{AdmissionMetrics, Metrics, WebhookMetrics};
pub use shutdown::shutdown_signal;
