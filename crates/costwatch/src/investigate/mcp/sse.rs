//! An incremental `text/event-stream` parser (the WHATWG event stream rules
//! MCP servers follow).
//!
//! Bytes are fed as they arrive, in chunks cut anywhere. Lines end with CRLF,
//! LF or CR (a CRLF split across two chunks is still one line end). `data:`
//! lines of one event are joined with `\n`; comments (`:`), `retry:` and
//! unknown fields are skipped; a blank line dispatches the event. An event
//! whose data is empty (a priming event, a keep-alive) is never returned, and
//! an event cut off by the end of the stream is dropped.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` type; `None` means the default type, `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; never empty.
    pub data: String,
    /// The last `id:` seen on the stream so far.
    pub id: Option<String>,
}

impl SseEvent {
    /// Whether this is a `message` event (the only type MCP uses for
    /// JSON-RPC messages).
    pub fn is_message(&self) -> bool {
        self.event.as_deref().is_none_or(|t| t == "message")
    }
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    after_cr: bool,
    started: bool,
    data: String,
    event: Option<String>,
    last_id: Option<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds the next bytes of the stream; returns the events they completed.
    /// Fails only when a line is not UTF-8.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out)?;
                }
                b'\n' => self.end_line(&mut out)?,
                _ => self.line.push(b),
            }
        }
        Ok(out)
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), String> {
        let raw = std::mem::take(&mut self.line);
        let mut line =
            String::from_utf8(raw).map_err(|_| "the event stream is not UTF-8".to_owned())?;
        if !self.started {
            self.started = true;
            if let Some(rest) = line.strip_prefix('\u{feff}') {
                line = rest.to_owned();
            }
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let mut data = std::mem::take(&mut self.data);
        let event = self.event.take();
        if data.ends_with('\n') {
            data.pop();
        }
        if data.trim().is_empty() {
            return;
        }
        out.push(SseEvent {
            event,
            data,
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn parse(stream: &str) -> Vec<SseEvent> {
        SseParser::new().feed(stream.as_bytes()).unwrap()
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn lf_crlf_and_cr_line_ends_give_the_same_events() {
        let lf = "event: message\nid: 7\ndata: {\"a\":1}\n\n";
        let crlf = lf.replace('\n', "\r\n");
        let cr = lf.replace('\n', "\r");
        for stream in [lf.to_owned(), crlf, cr] {
            let events = parse(&stream);
            assert_eq!(
                events,
                [SseEvent {
                    event: Some("message".into()),
                    data: "{\"a\":1}".into(),
                    id: Some("7".into()),
                }],
                "{stream:?}"
            );
        }
    }

    #[test]
    fn data_lines_are_joined_with_newlines() {
        let events = parse("data: {\r\ndata:   \"a\": 1\r\ndata:}\r\n\r\n");
        // One leading space is removed, the others are data.
        assert_eq!(data(&events), ["{\n  \"a\": 1\n}"]);
        let v: serde_json::Value = serde_json::from_str(&events[0].data).unwrap();
        assert_eq!(v["a"], 1);
        assert_eq!(data(&parse("data\ndata: x\n\n")), ["\nx"]);
    }

    #[test]
    fn priming_events_comments_and_empty_events_are_skipped() {
        let stream = ": hello\r\nid: 0\r\ndata:\r\n\r\nretry: 3000\r\n\r\n\r\n\r\nevent: ping\r\n\r\ndata: real\r\n\r\n";
        let events = parse(stream);
        assert_eq!(data(&events), ["real"]);
        // The id of the priming event is still the last event id.
        assert_eq!(events[0].id.as_deref(), Some("0"));
        // The event type of a skipped event does not leak into the next one.
        assert!(events[0].is_message());
    }

    #[test]
    fn several_events_in_one_stream_keep_their_order_and_types() {
        let stream = "data: one\n\nevent: note\ndata: two\n\nid: 3\ndata: three\n\n";
        let events = parse(stream);
        assert_eq!(data(&events), ["one", "two", "three"]);
        assert!(events[0].is_message() && !events[1].is_message() && events[2].is_message());
        assert_eq!(events[2].id.as_deref(), Some("3"));
    }

    #[test]
    fn chunks_cut_anywhere_give_the_same_events() {
        let stream = ": c\r\nid: 0\r\ndata:\r\n\r\nevent: message\r\ndata: {\"x\":\r\ndata: \"é\"}\r\n\r\ndata: last\r\n\r\n";
        let whole = parse(stream);
        assert_eq!(data(&whole), ["{\"x\":\n\"é\"}", "last"]);
        let bytes = stream.as_bytes();
        for cut in 1..bytes.len() {
            let mut p = SseParser::new();
            let mut events = p.feed(&bytes[..cut]).unwrap();
            events.extend(p.feed(&bytes[cut..]).unwrap());
            assert_eq!(events, whole, "cut at {cut}");
        }
        // Byte by byte, too (a CRLF split in two is one line end).
        let mut p = SseParser::new();
        let mut events = Vec::new();
        for b in bytes {
            events.extend(p.feed(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(events, whole);
    }

    #[test]
    fn an_event_cut_off_by_the_end_of_the_stream_is_not_dispatched() {
        let mut p = SseParser::new();
        assert_eq!(
            data(&p.feed(b"data: done\n\ndata: half").unwrap()),
            ["done"]
        );
        assert!(p.feed(b"\n").unwrap().is_empty());
        assert_eq!(data(&p.feed(b"\n").unwrap()), ["half"]);
    }

    #[test]
    fn a_leading_bom_is_ignored_and_invalid_utf8_fails() {
        assert_eq!(data(&parse("\u{feff}data: x\n\n")), ["x"]);
        assert!(SseParser::new().feed(b"data: \xff\xfe\n\n").is_err());
    }
}
