//! HTTP/1.1 pieces shared by both ends: the bounded, linear-time head buffer, header-list
//! tokens, value checks and response writing.

use core::ops::Range;

/// Collects an HTTP head (request or response) from arbitrary chunks.
///
/// Each byte is searched for the `\r\n\r\n` terminator once: a push only looks at the new
/// bytes plus the three before them, so a head trickled in byte by byte costs linear time
/// (the quadratic re-parse behind CVE-2023-43669 cannot happen). The buffer never holds more
/// than `max` bytes: input past the limit is not copied before the limit is checked.
#[derive(Debug)]
pub(crate) struct HeadBuffer {
    buf: Vec<u8>,
    max: usize,
}

/// What one push produced.
#[derive(Debug)]
pub(crate) enum Fill {
    /// No terminator yet; the bytes are kept.
    Partial,
    /// `head` ends with `\r\n\r\n`; `rest` holds every byte that followed it.
    Complete { head: Vec<u8>, rest: Vec<u8> },
    /// `max` bytes arrived without a terminator. The buffer was emptied.
    TooLarge,
}

impl HeadBuffer {
    pub(crate) fn new(max: usize) -> Self {
        HeadBuffer {
            buf: Vec::new(),
            max,
        }
    }

    /// How many bytes are buffered.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> Fill {
        let prev = self.buf.len();
        // Copy at most what still fits: the limit is enforced before memory is committed.
        let take = bytes.len().min(self.max.saturating_sub(prev));
        self.buf.extend_from_slice(&bytes[..take]);
        // A terminator may straddle the old and new bytes: start three bytes back.
        let from = prev.saturating_sub(3);
        if let Some(i) = memchr::memmem::find(&self.buf[from..], b"\r\n\r\n") {
            let end = from + i + 4;
            let mut rest = self.buf.split_off(end);
            rest.extend_from_slice(&bytes[take..]);
            let head = core::mem::take(&mut self.buf);
            return Fill::Complete { head, rest };
        }
        if self.buf.len() >= self.max {
            self.buf = Vec::new();
            return Fill::TooLarge;
        }
        Fill::Partial
    }
}

/// The byte range `part` occupies inside `base`; `part` must be a sub-slice of `base`
/// (httparse hands out sub-slices of the buffer it parsed).
pub(crate) fn range_in(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = (part.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize);
    debug_assert!(start <= base.len() && part.len() <= base.len() - start);
    start..start + part.len()
}

/// The elements of a comma-separated header list (RFC 9110 5.6.1), trimmed of whitespace,
/// empty elements skipped.
pub(crate) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|item| !item.is_empty())
}

/// Whether any element of any of `values` is an ASCII case-insensitive match for `token`.
pub(crate) fn lists_contain<'a>(mut values: impl Iterator<Item = &'a [u8]>, token: &[u8]) -> bool {
    values.any(|v| list_items(v).any(|item| item.eq_ignore_ascii_case(token)))
}

/// RFC 9110 5.6.2: `token = 1*tchar`.
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter().all(|&b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// RFC 9110 5.5: a field value is visible characters, spaces and tabs (and obs-text); above
/// all no CR, LF or NUL, which would let a value inject headers.
pub(crate) fn is_field_value(s: &[u8]) -> bool {
    s.iter()
        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80)
}

/// The standard reason phrase for the statuses a handshake produces (empty for others,
/// which RFC 9112 4 allows).
pub(crate) fn reason_phrase(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Appends one header line. The caller has validated name and value.
pub(crate) fn put_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `HTTP/1.1 <status> <reason>\r\n`.
pub(crate) fn put_status_line(out: &mut Vec<u8>, status: u16) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Which limit of a head a header field would pass.
pub(crate) enum Over {
    /// The number of fields.
    Fields,
    /// The bytes of the head.
    Size,
}

/// What is left of a head's limits for its header fields (a handshake given as a field
/// list, as over HTTP/2): fields, and bytes counted over names and values. Each field is
/// checked before it is taken.
pub(crate) struct FieldRoom {
    fields: usize,
    bytes: usize,
}

impl FieldRoom {
    /// Room for `max_fields` fields and `max_size` bytes less the `before` bytes that came
    /// before the fields.
    pub(crate) fn new(max_fields: usize, max_size: usize, before: usize) -> Result<Self, Over> {
        let bytes = max_size.checked_sub(before).ok_or(Over::Size)?;
        Ok(FieldRoom {
            fields: max_fields,
            bytes,
        })
    }

    /// Takes the room of one field: the count first, then the size.
    pub(crate) fn take(&mut self, name: &str, value: &[u8]) -> Result<(), Over> {
        self.fields = self.fields.checked_sub(1).ok_or(Over::Fields)?;
        self.bytes = (self.bytes.checked_sub(name.len()))
            .and_then(|b| b.checked_sub(value.len()))
            .ok_or(Over::Size)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(fill: Fill) -> (Vec<u8>, Vec<u8>) {
        match fill {
            Fill::Complete { head, rest } => (head, rest),
            other => panic!("expected a complete head, got {other:?}"),
        }
    }

    #[test]
    fn terminator_split_across_pushes_is_found() {
        let mut b = HeadBuffer::new(64);
        assert!(matches!(b.push(b"GET / HTTP/1.1\r\n\r"), Fill::Partial));
        let (head, rest) = complete(b.push(b"\nabc"));
        assert_eq!(head, b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(rest, b"abc");
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn bytes_past_the_limit_are_not_buffered() {
        let mut b = HeadBuffer::new(8);
        assert!(matches!(b.push(&[b'a'; 5]), Fill::Partial));
        assert!(matches!(b.push(&[b'a'; 1000]), Fill::TooLarge));
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn leftover_past_the_limit_is_kept_when_the_head_fits() {
        let mut b = HeadBuffer::new(8);
        let mut input = b"a\r\n\r\n".to_vec();
        input.extend_from_slice(&[7; 100]);
        let (head, rest) = complete(b.push(&input));
        assert_eq!(head, b"a\r\n\r\n");
        assert_eq!(rest, vec![7; 100]);
    }

    #[test]
    fn list_items_trim_and_skip_empty_elements() {
        let items: Vec<&[u8]> = list_items(b" keep-alive ,, Upgrade\t,").collect();
        assert_eq!(items, vec![&b"keep-alive"[..], &b"Upgrade"[..]]);
        assert!(lists_contain(
            [&b"keep-alive, UPGRADE"[..]].into_iter(),
            b"upgrade"
        ));
        assert!(!lists_contain([&b"upgrades"[..]].into_iter(), b"upgrade"));
    }

    #[test]
    fn field_values_with_line_breaks_are_refused() {
        assert!(is_field_value(b"text/plain; q=1\t"));
        assert!(!is_field_value(b"a\r\nSet-Cookie: x"));
        assert!(!is_field_value(b"a\0"));
        assert!(is_token(b"chat.v2"));
        assert!(!is_token(b"chat v2"));
        assert!(!is_token(b""));
    }
}
