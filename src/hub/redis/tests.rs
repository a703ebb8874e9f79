//! Unit tests of the Redis broker's naming and reply parsing.

use super::*;

#[test]
fn channels_map_back_to_topics() {
    let b = RedisBroker::new(RedisConfig::new("redis://127.0.0.1:1/")).unwrap();
    let c = b.inner.channel("room:1");
    assert_eq!(c, "rapidws:{room:1}");
    assert_eq!(b.inner.topic_of(&c), Some("room:1"));
    assert_eq!(b.inner.topic_of("other:{x}"), None);
    assert_eq!(b.inner.stream_keys("t").0, "rapidws:{t}:s");
    let odd = b.inner.channel("}x");
    assert_eq!(odd, "rapidws:{ }x}");
    assert_eq!(b.inner.topic_of(&odd), Some("}x"));
}

#[test]
fn a_topics_channel_and_streams_share_one_cluster_slot() {
    let b = RedisBroker::new(RedisConfig::cluster(["redis://127.0.0.1:1/"])).unwrap();
    assert!(b.inner.is_cluster());
    assert_eq!(b.inner.publish_command(), "spublish");
    for topic in ["t", "room:1", "}x", "a}b", "{x}", "x{", "}", "{}", "a.b.c"] {
        let c = b.inner.channel(topic);
        let (s, m) = b.inner.stream_keys(topic);
        assert_eq!(Slot::for_key(&c), Slot::for_key(&s), "{topic}");
        assert_eq!(Slot::for_key(&c), Slot::for_key(&m), "{topic}");
        assert_eq!(b.inner.topic_of(&c), Some(topic));
    }
    assert_ne!(
        Slot::for_key(b.inner.channel("room:1")),
        Slot::for_key(b.inner.channel("room:2"))
    );
    let braces = RedisConfig::cluster(["redis://127.0.0.1:1/"]).with_prefix("app{1}");
    assert!(RedisBroker::new(braces).is_err());
    assert!(RedisBroker::new(RedisConfig::new("redis://127.0.0.1:1/").with_prefix("a{b}")).is_ok());
}

#[test]
fn history_replies_are_parsed_and_odd_ones_refused() {
    let entry = |id: &str, data: &[u8]| {
        Value::Array(vec![
            Value::BulkString(id.as_bytes().to_vec()),
            Value::Array(vec![
                Value::BulkString(b"p".to_vec()),
                Value::BulkString(data.to_vec()),
            ]),
        ])
    };
    let v = Value::Array(vec![
        Value::BulkString(b"1700000000123456".to_vec()),
        Value::BulkString(b"7".to_vec()),
        Value::Array(vec![entry("6-0", b"a"), entry("7-0", b"b")]),
    ]);
    let page = parse_page(v).unwrap();
    assert_eq!(
        page.top,
        Some(Position {
            offset: 7,
            epoch: 1_700_000_000_123_456
        })
    );
    assert_eq!(page.entries.len(), 2);
    assert_eq!(page.entries[1].0, 7);
    let none = Value::Array(vec![
        Value::BulkString(Vec::new()),
        Value::BulkString(b"0".to_vec()),
        Value::Array(vec![]),
    ]);
    assert!(parse_page(none).unwrap().top.is_none());
    assert!(parse_page(Value::Nil).is_none());
    assert!(parse_page(Value::Array(vec![Value::Nil])).is_none());
    let bad_id = Value::Array(vec![
        Value::BulkString(b"1".to_vec()),
        Value::Int(1),
        Value::Array(vec![entry("x", b"a")]),
    ]);
    assert!(parse_page(bad_id).is_none());
}

#[test]
fn key_slots_are_the_cluster_ones() {
    for key in [
        "",
        "a",
        "rapidws:{room:1}",
        "rapidws:{ }x}",
        "{}x",
        "x{}{y}",
        "{user1000}.following",
        "foo{bar}{zap}",
        "{",
        "}{",
    ] {
        let mine = cluster::key_slot(key.as_bytes());
        assert_eq!(Slot::new(mine), Some(Slot::for_key(key)), "{key:?}");
    }
    // From the Redis Cluster specification's examples.
    assert_eq!(cluster::key_slot(b"123456789"), 0x31C3);
}

#[test]
fn slot_maps_are_read_from_cluster_slots_replies() {
    let int = Value::Int;
    let s = |t: &str| Value::BulkString(t.as_bytes().to_vec());
    let node = |host: &str, port: i64, id: &str| Value::Array(vec![s(host), int(port), s(id)]);
    let reply = Value::Array(vec![
        Value::Array(vec![
            int(5461),
            int(10922),
            node("10.0.0.2", 7001, "b"),
            node("10.0.0.5", 7004, "e"),
        ]),
        Value::Array(vec![int(0), int(5460), node("", 7000, "a")]),
        Value::Array(vec![int(10923), int(16383), node("?", 7002, "c")]),
    ]);
    let map = cluster::SlotMap::parse(&reply, "10.0.0.1").unwrap();
    let owner = |slot| {
        map.owner(slot)
            .map(|m| (m.host.as_str(), m.port, m.id.as_str()))
    };
    assert_eq!(owner(0), Some(("10.0.0.1", 7000, "a")));
    assert_eq!(owner(5460), Some(("10.0.0.1", 7000, "a")));
    assert_eq!(owner(5461), Some(("10.0.0.2", 7001, "b")));
    assert_eq!(owner(10922), Some(("10.0.0.2", 7001, "b")));
    // No known endpoint: no owner to subscribe at.
    assert_eq!(owner(10923), None);
    assert_eq!(owner(16383), None);
    for bad in [
        Value::Nil,
        Value::Array(vec![Value::Array(vec![int(5), int(4), node("h", 1, "x")])]),
        Value::Array(vec![Value::Array(vec![
            int(0),
            int(16384),
            node("h", 1, "x"),
        ])]),
        Value::Array(vec![Value::Array(vec![
            int(0),
            int(1),
            node("h", 70000, "x"),
        ])]),
        Value::Array(vec![Value::Array(vec![int(0), int(1)])]),
    ] {
        assert!(cluster::SlotMap::parse(&bad, "h").is_none(), "{bad:?}");
    }
}
