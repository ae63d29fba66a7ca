//! JSON log lines, one object a line, with the fields of every enclosing span merged in.
//!
//! Why flat: a job's story is spread over the dispatcher and many workers; with the job, plan,
//! segment and worker ids as top-level keys of every line (from the `job` span the dispatcher
//! runs each job in and the `worker`/`task` spans of a worker), a collector or
//! `jq 'select(.job == "…")'` filters one job out of all machines' logs without knowing which
//! span carried which id. tracing-subscriber's own JSON format nests span fields in a `spans`
//! list instead.

use std::fmt;

use serde_json::{Map, Value};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written (`--log-format`, `TESSERA_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colour only on a terminal).
    #[default]
    Text,
    /// One JSON object a line with the span ids merged in (module doc).
    Json,
}

/// The event formatter of [`LogFormat::Json`]: `timestamp`, `level`, `target`, the fields of
/// every enclosing span from the outermost in, then the event's own fields (`message` among
/// them); an inner value wins over an outer one of the same name.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), Value::String(timestamp));
        let meta = event.metadata();
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert("target".into(), Value::String(meta.target().to_string()));
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            let extensions = span.extensions();
            if let Some(fields) = extensions.get::<FormattedFields<N>>() {
                merge(&mut line, &fields.fields);
            }
        }
        let mut fields = String::new();
        ctx.format_fields(Writer::new(&mut fields), event)?;
        merge(&mut line, &fields);
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// Adds the keys of the JSON object `fields` (as [`JsonFields`] writes them) to `line`;
/// anything else is kept whole under `fields`, so nothing logged is lost.
fn merge(line: &mut Map<String, Value>, fields: &str) {
    if fields.is_empty() {
        return;
    }
    match serde_json::from_str::<Value>(fields) {
        Ok(Value::Object(map)) => line.extend(map),
        _ => {
            line.insert("fields".into(), Value::String(fields.to_string()));
        }
    }
}

/// The JSON subscriber with `filter` writing to `writer`; the one place the JSON format is put
/// together, so tests (here and of the spans the worker and the dispatcher open) check what
/// the binaries run.
pub fn json_subscriber<W>(filter: &str, writer: W) -> Result<impl Subscriber + Send + Sync, String>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("log filter '{filter}': {e}"))?;
    Ok(tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .fmt_fields(JsonFields::new())
        .event_format(FlatJson)
        .finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines(capture: &Capture) -> Vec<Value> {
        let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    #[test]
    fn every_line_carries_the_ids_of_its_spans() {
        let capture = Capture::default();
        let sink = capture.clone();
        let subscriber = json_subscriber("info", move || sink.clone()).unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let worker = tracing::info_span!("worker", worker = "w1");
            let _w = worker.enter();
            tracing::info!("connected");
            let task = tracing::info_span!(
                "task",
                job = "j-1",
                plan = tracing::field::Empty,
                segment = 3u32
            );
            task.record("plan", 42u64);
            let _t = task.enter();
            tracing::info!(frames = 250u64, "segment \"done\"");
            tracing::debug!("filtered out");
        });
        let lines = lines(&capture);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["worker"], "w1");
        assert_eq!(lines[0]["message"], "connected");
        assert!(lines[0].get("job").is_none(), "{:?}", lines[0]);
        let done = &lines[1];
        assert_eq!(done["worker"], "w1");
        assert_eq!(done["job"], "j-1");
        assert_eq!(done["plan"], 42);
        assert_eq!(done["segment"], 3);
        assert_eq!(done["frames"], 250);
        assert_eq!(done["message"], "segment \"done\"");
        assert_eq!(done["level"], "INFO");
        assert!(done["timestamp"].as_str().unwrap().contains('T'), "{done}");
    }

    #[test]
    fn the_format_is_named_text_or_json() {
        assert_eq!(LogFormat::from_str("json", true), Ok(LogFormat::Json));
        assert_eq!(LogFormat::from_str("TEXT", true), Ok(LogFormat::Text));
        assert!(LogFormat::from_str("yaml", true).is_err());
        assert_eq!(LogFormat::default(), LogFormat::Text);
    }

    #[test]
    fn fields_that_are_not_an_object_are_kept() {
        let mut line = Map::new();
        merge(&mut line, "not json");
        merge(&mut line, "");
        assert_eq!(line["fields"], "not json");
        assert_eq!(line.len(), 1);
    }
}
