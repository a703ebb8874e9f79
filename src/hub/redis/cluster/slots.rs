//! The slot map: which master owns each slot (`CLUSTER SLOTS`), the slot of a channel,
//! and how the subscriber reads the map and follows it when it changes.

use redis::ProtocolVersion;

use super::shards::node_info;
use super::*;

/// A master of the cluster: where it listens, and its node id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(in crate::hub::redis) struct Master {
    pub(in crate::hub::redis) host: String,
    pub(in crate::hub::redis) port: u16,
    pub(in crate::hub::redis) id: String,
}

/// Which master owns each slot, as `CLUSTER SLOTS` said.
#[derive(Debug, Default, PartialEq)]
pub(in crate::hub::redis) struct SlotMap {
    /// `(first, last, index in masters)`, sorted.
    ranges: Vec<(u16, u16, usize)>,
    pub(super) masters: Vec<Master>,
}

impl SlotMap {
    /// The map in a `CLUSTER SLOTS` reply from the node at `host` (an empty endpoint
    /// means that node's host; ranges whose master has no known endpoint, `?`, are left
    /// out). `None` when the reply is not one.
    pub(in crate::hub::redis) fn parse(v: &Value, host: &str) -> Option<SlotMap> {
        fn text(v: Option<&Value>) -> Option<&str> {
            std::str::from_utf8(bulk(v?)?).ok()
        }
        let Value::Array(entries) = v else {
            return None;
        };
        let mut map = SlotMap::default();
        for e in entries {
            let Value::Array(e) = e else { return None };
            let (Some(first), Some(last), Some(Value::Array(node))) = (
                e.first().and_then(number),
                e.get(1).and_then(number),
                e.get(2),
            ) else {
                return None;
            };
            let endpoint = text(node.first())?;
            let master = Master {
                host: if endpoint.is_empty() { host } else { endpoint }.to_owned(),
                port: u16::try_from(node.get(1).and_then(number)?).ok()?,
                id: text(node.get(2))?.to_owned(),
            };
            if endpoint == "?" {
                continue;
            }
            let i = match map.masters.iter().position(|m| *m == master) {
                Some(i) => i,
                None => {
                    map.masters.push(master);
                    map.masters.len() - 1
                }
            };
            let (first, last) = (u16::try_from(first).ok()?, u16::try_from(last).ok()?);
            if first > last || last >= SLOTS {
                return None;
            }
            map.ranges.push((first, last, i));
        }
        map.ranges.sort_unstable();
        Some(map)
    }

    /// The master that owns `slot`.
    pub(in crate::hub::redis) fn owner(&self, slot: u16) -> Option<&Master> {
        let i = self.ranges.partition_point(|r| r.1 < slot);
        let &(first, _, m) = self.ranges.get(i)?;
        (first <= slot).then(|| &self.masters[m])
    }
}

/// Slots in a Redis Cluster.
const SLOTS: u16 = 16384;

/// The cluster slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key when it
/// has none, modulo 16384), as the Redis Cluster specification defines it.
pub(in crate::hub::redis) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &b in tagged {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// `CLUSTER SLOTS`.
fn slots_cmd() -> redis::Cmd {
    let mut c = redis::cmd("CLUSTER");
    c.arg("SLOTS");
    c
}

impl Sharded {
    /// Reads the slot map through the control connection, or through the first master
    /// or configured node that answers.
    pub(super) async fn read_map(&mut self) -> Option<SlotMap> {
        let timeout = self.inner.config.timeout;
        if let Some((asked, c)) = self.control.as_mut() {
            if let Ok(Ok(v)) = tokio::time::timeout(timeout, slots_cmd().query_async(c)).await
                && let Some(map) = SlotMap::parse(&v, asked)
            {
                self.map_stale = false;
                return Some(map);
            }
            self.control = None;
        }
        let mut candidates: Vec<(String, u16)> = self
            .map
            .iter()
            .flat_map(|m| m.masters.iter().map(|m| (m.host.clone(), m.port)))
            .collect();
        candidates.extend(self.seeds.iter().cloned());
        for (host, port) in candidates {
            let info = node_info(&self.seed, &host, port, ProtocolVersion::RESP2);
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout));
            let attempt = async {
                let mut c = Client::open(info)?
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                let v: Value = slots_cmd().query_async(&mut c).await?;
                Ok::<_, redis::RedisError>((c, v))
            };
            if let Ok(Ok((c, v))) = tokio::time::timeout(timeout, attempt).await
                && let Some(map) = SlotMap::parse(&v, &host)
            {
                self.control = Some((host, c));
                self.map_stale = false;
                return Some(map);
            }
        }
        None
    }

    /// Takes a new slot map: topics held on a master that no longer owns their slot are
    /// unsubscribed there and lost; connections to nodes that are no longer masters (or
    /// not under the same id) are let go.
    pub(super) async fn apply_map(&mut self, map: SlotMap) {
        let masters: Vec<Master> = self.shards.keys().cloned().collect();
        for m in masters {
            if !map.masters.contains(&m) {
                self.drop_shard(&m, "redis cluster master left its slots");
                continue;
            }
            let Some(shard) = self.shards.get_mut(&m) else {
                continue;
            };
            let moved: Vec<Topic> = shard
                .held
                .iter()
                .filter(|t| {
                    let slot = key_slot(self.inner.channel(t).as_bytes());
                    map.owner(slot) != Some(&m)
                })
                .cloned()
                .collect();
            for t in &moved {
                shard.held.remove(t);
            }
            self.unsubscribe(&m, moved.clone()).await;
            self.lose(moved, "redis cluster slot moved to another master");
        }
        self.map = Some(map);
    }

    /// Reads the slot map and takes it when it changed (a failover or slot move that
    /// did not show on the broker's connections).
    pub(super) async fn check_topology(&mut self) {
        if self.needs_repair() {
            // The repair reads it anyway.
            return;
        }
        if let Some(map) = self.read_map().await
            && self.map.as_ref() != Some(&map)
        {
            self.drain();
            self.apply_map(map).await;
        }
    }
}
