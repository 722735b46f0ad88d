//! A file's lines, streamed from a byte offset (of the inflated text for
//! a `.gz` file), and what one line of OTLP/JSON traces holds.

use super::super::decode::decode_json_line;
use super::list::file_error;
use crate::printable::printable;
use crate::source::SourceError;
use flate2::read::MultiGzDecoder;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The lines of one file, read one at a time.
pub(super) struct Lines {
    path: PathBuf,
    reader: BufReader<Box<dyn Read>>,
    /// Where the next line starts.
    offset: u64,
    /// The next line's number, from 1.
    number: u64,
    line: String,
}

/// One line as read: where it starts, its number and its text (with its
/// newline, when it has one).
pub(super) struct Line<'a> {
    pub offset: u64,
    pub number: u64,
    pub text: &'a str,
}

impl Lines {
    /// The lines of `path` (inflated when its name ends in `.gz`) from
    /// `offset`, the start of line `number`.
    pub(super) fn open(path: &Path, offset: u64, number: u64) -> Result<Lines, SourceError> {
        let mut file = File::open(path).map_err(|e| file_error(path, &e))?;
        let gzipped = path.extension().is_some_and(|e| e == "gz");
        let mut reader: Box<dyn Read> = if gzipped {
            Box::new(MultiGzDecoder::new(file))
        } else {
            file.seek(SeekFrom::Start(offset))
                .map_err(|e| file_error(path, &e))?;
            Box::new(file)
        };
        if gzipped && offset > 0 {
            // A gzip stream cannot be entered in the middle: what comes
            // before is inflated and dropped.
            std::io::copy(&mut (&mut reader).take(offset), &mut std::io::sink())
                .map_err(|e| read_error(path, number, &e))?;
        }
        Ok(Lines {
            path: path.to_owned(),
            reader: BufReader::new(reader),
            offset,
            number,
            line: String::new(),
        })
    }

    /// The next line; `None` at the end of the file.
    pub(super) fn next_line(&mut self) -> Result<Option<Line<'_>>, SourceError> {
        self.line.clear();
        let read = self
            .reader
            .read_line(&mut self.line)
            .map_err(|e| read_error(&self.path, self.number, &e))?;
        if read == 0 {
            return Ok(None);
        }
        let line = Line {
            offset: self.offset,
            number: self.number,
            text: &self.line,
        };
        self.offset += read as u64;
        self.number += 1;
        Ok(Some(line))
    }
}

impl Line<'_> {
    /// Where the line after it starts.
    pub(super) fn end(&self) -> u64 {
        self.offset + self.text.len() as u64
    }

    /// The export request the line holds; `None` for a blank line, and for
    /// a last line without its newline that is not whole yet (being
    /// written: the next read finds it whole). Anything else that is not
    /// OTLP/JSON traces fails with the file and line number.
    pub(super) fn request(
        &self,
        path: &Path,
    ) -> Result<Option<ExportTraceServiceRequest>, SourceError> {
        if self.text.trim().is_empty() {
            return Ok(None);
        }
        match decode_json_line(self.text) {
            Ok(req) => Ok(Some(req)),
            Err(_) if !self.text.ends_with('\n') => Ok(None),
            Err(e) => Err(line_error(path, self.number, &e.to_string())),
        }
    }
}

/// A line could not be read: text that is not UTF-8 (or a damaged gzip
/// stream) is the line's fault; anything else may pass.
fn read_error(path: &Path, number: u64, e: &std::io::Error) -> SourceError {
    if e.kind() == ErrorKind::InvalidData {
        line_error(path, number, &e.to_string())
    } else {
        file_error(path, e)
    }
}

/// A line that is not OTLP/JSON traces.
fn line_error(path: &Path, number: u64, error: &str) -> SourceError {
    SourceError::Invalid(format!(
        "{}:{number}: {error}",
        printable(&path.display().to_string())
    ))
}
