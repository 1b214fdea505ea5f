//! `--otlp ENDPOINT` of the commands that run long (`demo`, `soak`, `bench`): the store's
//! spans (docs/design.md, section 5.8) exported to an OpenTelemetry collector over OTLP/HTTP
//! with protobuf, with the `otlp` feature. Without it the option is refused with a hint, not
//! ignored.

use anyhow::Result;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// What flushes the spans still buffered when the command ends.
pub(crate) struct Tracing {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Tracing {
    /// Sends the spans still buffered; waits for the collector to take them.
    pub(crate) fn shutdown(self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: --otlp: the last spans were not sent: {e}");
        }
    }
}

/// Installs the process's subscriber: warnings on standard error, and with `otlp` the
/// store's spans exported to that endpoint.
pub(crate) fn install(otlp: Option<&str>) -> Result<Tracing> {
    let stderr = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(LevelFilter::WARN);
    let registry = tracing_subscriber::registry().with(stderr);
    let Some(endpoint) = otlp else {
        registry.init();
        return Ok(Tracing {
            #[cfg(feature = "otlp")]
            provider: None,
        });
    };
    #[cfg(feature = "otlp")]
    {
        let (layer, provider) = exporter(endpoint)?;
        registry.with(layer.with_filter(store_spans())).init();
        eprintln!("otlp: exporting the store's spans to {}", traces_url(endpoint));
        Ok(Tracing { provider: Some(provider) })
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = (registry, store_spans());
        anyhow::bail!(
            "--otlp {endpoint}: this build exports no spans; build with `--features otlp` \
             (cargo install actionstate --features otlp)"
        )
    }
}

/// The spans exported: the store's (`actionstate.` spans, at `info`), none of the clients'.
fn store_spans() -> Targets {
    Targets::new().with_target("actionstate_recovery", LevelFilter::INFO)
}

/// The OTLP/HTTP traces URL of `endpoint`: as given when it names a path, else the
/// collector's default path `/v1/traces` after it (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read).
#[cfg(feature = "otlp")]
fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    let has_path = trimmed.split_once("://").is_some_and(|(_, rest)| rest.contains('/'));
    if has_path { trimmed.to_owned() } else { format!("{trimmed}/v1/traces") }
}

/// Spans the exporter buffers at most (the SDK's default is 2,048): bounded, and larger than
/// what a command opens between two exports.
#[cfg(feature = "otlp")]
const SPAN_QUEUE: usize = 65_536;

/// The layer that turns `tracing` spans into OpenTelemetry spans, exported in batches from a
/// thread of the SDK's own (the blocking HTTP client must not run on the async runtime).
#[cfg(feature = "otlp")]
fn exporter<S>(endpoint: &str) -> Result<(impl Layer<S>, opentelemetry_sdk::trace::SdkTracerProvider)>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use anyhow::Context;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(traces_url(endpoint))
        .build()
        .with_context(|| format!("--otlp {endpoint}"))?;
    use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("actionstate").build();
    // The SDK drops the spans that do not fit its queue; a demo's crash and replay open
    // thousands in a second, and a trace with holes would break the links to first attempts.
    let queue = BatchConfigBuilder::default().with_max_queue_size(SPAN_QUEUE).build();
    let processor = BatchSpanProcessor::builder(exporter).with_batch_config(queue).build();
    let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("actionstate"));
    Ok((layer, provider))
}

#[cfg(all(test, feature = "otlp"))]
mod tests {
    use super::traces_url;

    #[test]
    fn an_endpoint_without_a_path_gets_the_collectors_traces_path() {
        assert_eq!(traces_url("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(traces_url("http://127.0.0.1:4318/"), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(traces_url("https://otel.example/custom/traces"), "https://otel.example/custom/traces");
    }
}
