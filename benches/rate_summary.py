#!/usr/bin/env python3
"""Summary of the rate cells in benches/results/rate.csv (written by benches/run.sh).

    python3 benches/rate_summary.py [benches/results/rate.csv]

For every rate: each server's EER (echoes per second per server CPU %) over the rounds
(mean, then the range), its median p99 latency, peak RSS and how much of the offered
load it answered; then, round by round, each rapidws variant's EER over the better of
fastwebsockets and tokio-websockets in the same round, and over the raw TCP echo. The
rows of one server come in round order (run.sh runs every server once per round), so the
n-th row of a server at a rate is its round n.
"""

import csv
import os
import statistics
import sys

PEERS = ("fastwebsockets", "tokio-websockets")
RAW = "raw-tcp"


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "rate.csv")
    rounds: dict[str, dict[str, list[dict]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rounds.setdefault(row["rate_per_conn"], {}).setdefault(row["server"], []).append(row)
    for rate, servers in rounds.items():
        conns = next(iter(servers.values()))[0]["conns"]
        n = max(len(rows) for rows in servers.values())
        print(f"rate cells: {conns} connections x {rate} msg/s, 1 KiB, {n} round(s)")
        print(f"  {'server':<22} {'EER mean':>9} {'EER range':>15} {'p99 ms':>7} {'RSS MiB':>8} {'answered':>9}")
        for server, rows in servers.items():
            eers = [float(r["eer"]) for r in rows]
            p99 = statistics.median(float(r["p99_us"]) for r in rows) / 1000
            rss = max(int(r["server_peak_rss_bytes"]) for r in rows) / 2**20
            answered = sum(float(r["answered_per_s"]) for r in rows) / sum(
                float(r["offered_per_s"]) for r in rows)
            print(f"  {server:<22} {statistics.mean(eers):>9.0f} "
                  f"{min(eers):>7.0f}-{max(eers):<7.0f} {p99:>7.1f} {rss:>8.0f} {answered:>8.1%}")
        peers = [p for p in PEERS if p in servers]
        ours = [s for s in servers if s.startswith("rapidws")]
        for base, names in (("the better peer", peers), (RAW, [RAW] if RAW in servers else [])):
            if not names:
                continue
            print(f"  EER over {base}, round by round (and of the means):")
            for server in ours:
                ratios = []
                for i, row in enumerate(servers[server]):
                    best = max((float(servers[p][i]["eer"]) for p in names if i < len(servers[p])),
                               default=0.0)
                    if best > 0:
                        ratios.append(float(row["eer"]) / best)
                means = max(statistics.mean(float(r["eer"]) for r in servers[p]) for p in names)
                mean = statistics.mean(float(r["eer"]) for r in servers[server]) / means
                print(f"    {server:<20} " + " ".join(f"{r:.2f}" for r in ratios)
                      + f"  ({mean:.3f}x)")


if __name__ == "__main__":
    main()
