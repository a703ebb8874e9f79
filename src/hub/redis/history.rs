//! Reading the replies of the history script.

use super::*;

pub(super) fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

pub(super) fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        other => std::str::from_utf8(bulk(other)?).ok()?.parse().ok(),
    }
}

/// `{epoch, top, {{id, {"p", envelope}}, ...}}` from the history script.
pub(super) fn parse_page(v: Value) -> Option<HistoryPage> {
    let Value::Array(parts) = v else { return None };
    let [epoch, top, entries] = <[Value; 3]>::try_from(parts).ok()?;
    let epoch_raw = bulk(&epoch)?;
    if epoch_raw.is_empty() {
        return Some(HistoryPage::default());
    }
    let epoch = std::str::from_utf8(epoch_raw).ok()?.parse().ok()?;
    let top = Position {
        offset: number(&top)?,
        epoch,
    };
    let Value::Array(entries) = entries else {
        return None;
    };
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Array(e) = e else { return None };
        let [id, fields] = <[Value; 2]>::try_from(e).ok()?;
        let id = std::str::from_utf8(bulk(&id)?).ok()?;
        let offset: u64 = id.strip_suffix("-0")?.parse().ok()?;
        let Value::Array(fields) = fields else {
            return None;
        };
        let data = fields.get(1).and_then(bulk)?;
        out.push((offset, Bytes::copy_from_slice(data)));
    }
    Some(HistoryPage {
        top: Some(top),
        entries: out,
    })
}
