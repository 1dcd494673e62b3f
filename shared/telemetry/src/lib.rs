//! Telemetry for every Portcullis service, set up in one place.
//!
//! [`init`] installs a `tracing` subscriber (human or JSON logs, filtered by
//! `RUST_LOG`/`--log-level`) and, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, an OpenTelemetry OTLP/gRPC
//! exporter configured by the standard `OTEL_*` variables, with the W3C
//! TraceContext and Baggage propagators. With no endpoint, nothing is
//! exported and no OpenTelemetry layer sits on the hot path. The returned
//! [`Telemetry`] flushes pending spans when `main` shuts it down.
//!
//! [`extract_context`] continues a trace from incoming HTTP headers
//! (`traceparent`), as the webhook servers do for the API server's calls.
//! This crate sets up and propagates; it never decides what to record.

#![forbid(unsafe_code)]

mod plain;

use opentelemetry::propagation::TextMapCompositePropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object per line, with the current span's fields.
    Json,
}

/// Logging flags shared by every service (`#[clap(flatten)]` them).
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log filter, in `RUST_LOG` syntax (e.g. `info,portcullis_injector=debug`).
    #[arg(long, global = true, env = "PORTCULLIS_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, global = true, env = "PORTCULLIS_LOG_FORMAT", value_enum, default_value = "plain")]
    pub log_format: LogFormat,
}

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The `--log-level` filter does not parse.
    #[error("invalid log filter {filter:?}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// What the parser said.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// The OTLP exporter could not be built from the `OTEL_*` variables.
    #[error("cannot build the OTLP span exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// Handle to the installed telemetry; call [`Telemetry::shutdown`] on exit
/// so that pending spans reach the collector.
#[derive(Debug)]
#[must_use = "keep the handle and call shutdown() on exit, or spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes and stops the exporter.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(err) = provider.shutdown()
        {
            tracing::warn!(error = %err, "flushing spans on shutdown failed");
        }
    }
}

/// Installs logging and, when configured, span export for `service_name`
/// (overridden by `OTEL_SERVICE_NAME`) as the global subscriber.
pub fn init(service_name: &'static str, args: &LogArgs) -> Result<Telemetry, TelemetryError> {
    let (subscriber, telemetry) = subscriber(service_name, args)?;
    subscriber.try_init().map_err(TelemetryError::AlreadyInstalled)?;
    if let Some(provider) = &telemetry.provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(telemetry)
}

/// Runs `work` (a long-running command) with telemetry set up for
/// `service_name` by [`init`], and flushes the pending spans when it ends,
/// however it ends.
pub async fn traced<T, E: From<TelemetryError>>(
    service_name: &'static str,
    args: &LogArgs,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let telemetry = init(service_name, args)?;
    let result = work.await;
    telemetry.shutdown();
    result
}

/// The subscriber [`init`] installs, without installing it (benchmarks and
/// tests scope it with `tracing::subscriber::with_default`).
pub fn subscriber(
    service_name: &'static str,
    args: &LogArgs,
) -> Result<(impl tracing::Subscriber + Send + Sync + 'static, Telemetry), TelemetryError> {
    subscriber_exporting_to(service_name, args, export_configured().then_some(None))
}

/// As [`subscriber`], with export decided by the caller: `None` exports
/// nothing, `Some(None)` exports where the `OTEL_*` variables say,
/// `Some(Some(endpoint))` exports to `endpoint`.
pub fn subscriber_exporting_to(
    service_name: &'static str,
    args: &LogArgs,
    export: Option<Option<&str>>,
) -> Result<(impl tracing::Subscriber + Send + Sync + 'static, Telemetry), TelemetryError> {
    let filter = EnvFilter::try_new(&args.log_level)
        .map_err(|source| TelemetryError::Filter { filter: args.log_level.clone(), source })?;
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
    let provider = export.map(|endpoint| provider(service_name, endpoint)).transpose()?;
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service_name)));
    // Colour only for a person at a terminal: a file, a pipe or a container
    // log gets plain text, with fields written without styles.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let (coloured, plain, json) = match args.log_format {
        LogFormat::Plain if colour => (Some(tracing_subscriber::fmt::layer()), None, None),
        LogFormat::Plain => {
            (None, Some(tracing_subscriber::fmt::layer().with_ansi(false).fmt_fields(plain::PlainFields)), None)
        }
        LogFormat::Json => (
            None,
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .flatten_event(true),
            ),
        ),
    };
    let subscriber = tracing_subscriber::registry().with(filter).with(otel).with(coloured).with(plain).with(json);
    Ok((subscriber, Telemetry { provider }))
}

fn export_configured() -> bool {
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        .iter()
        .any(|var| std::env::var(var).is_ok_and(|v| !v.is_empty()))
        && std::env::var("OTEL_SDK_DISABLED").map_or(true, |v| v != "true")
}

fn provider(service_name: &'static str, endpoint: Option<&str>) -> Result<SdkTracerProvider, TelemetryError> {
    use opentelemetry_otlp::WithExportConfig as _;
    // The builders read OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER(_ARG),
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES themselves.
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Some(endpoint) = endpoint {
        exporter = exporter.with_endpoint(endpoint);
    }
    let exporter = exporter.build().map_err(TelemetryError::Exporter)?;
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(service_name);
    }
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build())
}

/// The trace context carried by `headers` (W3C `traceparent`/`baggage`),
/// to be set as the parent of the span handling the request.
pub fn extract_context(headers: &http::HeaderMap) -> opentelemetry::Context {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
    })
}

/// Makes `span` a child of the trace carried by `headers`, if any, and
/// records its `trace_id` (and, when spans are exported, `span_id`) as
/// fields of `span`, so that every log line inside it carries them. The
/// span must declare both fields (as `tracing::field::Empty`).
/// Returns the trace id recorded, if any.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let remote = extract_context(headers);
    let remote_trace = remote.span().span_context().trace_id();
    // A span's parent can only be set before it is entered; the error then
    // means the trace was not continued, which must not fail the request.
    let _ = span.set_parent(remote);
    let context = span.context();
    let own = context.span().span_context().clone();
    if own.is_valid() {
        let trace_id = own.trace_id().to_string();
        span.record("trace_id", trace_id.as_str());
        span.record("span_id", own.span_id().to_string().as_str());
        Some(trace_id)
    } else if remote_trace != opentelemetry::trace::TraceId::INVALID {
        // Not exporting: still log the caller's trace id, to find the API
        // server's side of the request.
        let trace_id = remote_trace.to_string();
        span.record("trace_id", trace_id.as_str());
        Some(trace_id)
    } else {
        None
    }
}

/// Writes the current span's trace context (W3C `traceparent`, `baggage`)
/// into `headers`, for an outgoing call (gRPC metadata included).
pub fn inject_context(headers: &mut http::HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut opentelemetry_http::HeaderInjector(headers));
    });
}

/// `err` and its sources, `: `-separated, for one line: each cause once,
/// outermost first.
///
/// Many errors (kube's among them) write their source into their own
/// message as well as returning it from `source()`; a cause whose text is
/// already in the message of the error it is the source of is left out,
/// so that it is not read two or three times. Only that message is
/// compared: a short cause ("timed out") is kept even when some other
/// part of the line happens to contain its words.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut outer = out.clone();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !outer.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        outer = text;
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that writes its source into its own message, as kube's do.
    #[derive(Debug, thiserror::Error)]
    #[error("failed to infer config: kubeconfig: ({0})")]
    struct Repeats(#[source] std::io::Error);

    /// A context that does not.
    #[derive(Debug, thiserror::Error)]
    #[error("starting")]
    struct Wraps(#[source] Repeats);

    #[test]
    fn each_cause_is_named_once_outermost_first() {
        let err = Wraps(Repeats(std::io::Error::other("reading /missing: not found")));
        assert_eq!(error_chain(&err), "starting: failed to infer config: kubeconfig: (reading /missing: not found)");
    }

    /// A context whose words a deeper cause repeats.
    #[derive(Debug, thiserror::Error)]
    #[error("connecting timed out")]
    struct Says(#[source] Wraps);

    #[test]
    fn a_cause_is_left_out_only_when_the_error_it_caused_says_it() {
        let err = Says(Wraps(Repeats(std::io::Error::other("timed out"))));
        assert_eq!(
            error_chain(&err),
            "connecting timed out: starting: failed to infer config: kubeconfig: (timed out)",
            "kept: \"starting\" does not say it; left out: the kubeconfig error does"
        );
    }
}
