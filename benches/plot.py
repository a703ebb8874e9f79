#!/usr/bin/env python3
"""Turns benches/results/{echo,idle,firehose}.csv and meta.json into the tables of the
"Echo matrix", "Pipelined echo", "Echo with permessage-deflate", "Idle memory per
connection" and "Firehose client" sections of benches/RESULTS.md, into
benches/results/TABLES.md (every table in full: messages per second, latency, each pipelined
cell per server, the targets cell by cell) and into SVG charts next to RESULTS.md. Standard
library only (hand-written SVG), so CI and fresh machines need nothing.

    python3 benches/plot.py

Only the text between the BEGIN/END markers of those sections of RESULTS.md is replaced;
the rest of it (other benchmarks, the hand-written method notes) is left as it is.
RESULTS.md gets the headline tables; TABLES.md is written whole each time.
"""

import csv
import html
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
TABLES_MD = os.path.join(RESULTS, "TABLES.md")

OURS = ["rapidws", "rapidws-feed"]
# What the pipelined targets are about: the plain loop and the handler API (feed is shown).
PIPELINED_OURS = ["rapidws", "rapidws-handler", "rapidws-handler-ref", "rapidws-feed"]
PLAIN = ["rapidws", "rapidws-feed", "rapidws-handler", "rapidws-handler-ref", "rapidws-split",
         "tokio-tungstenite",
         "fastwebsockets", "tokio-websockets", "yawc", "wtx", "raw-tcp"]
PEERS = ["tokio-tungstenite", "fastwebsockets", "tokio-websockets", "yawc", "wtx"]
FH_OURS = ["rapidws", "rapidws-ref", "rapidws-batch"]
FH_PEERS = ["tokio-tungstenite", "fastwebsockets", "tokio-websockets", "wtx"]
FH_MEM = ["mem-scan", "mem-run", "mem-decoder", "mem-connection"]
DEFLATE = ["rapidws-deflate", "yawc-deflate"]
COLORS = {
    "rapidws": "#d62728", "rapidws-feed": "#ff7f0e", "rapidws-split": "#ff9896",
    "rapidws-deflate": "#d62728",
    "tokio-tungstenite": "#1f77b4", "fastwebsockets": "#2ca02c",
    "tokio-websockets": "#9467bd", "yawc": "#8c564b", "yawc-deflate": "#8c564b",
    "raw-tcp": "#7f7f7f", "rapidws-handler": "#e377c2", "wtx": "#17becf",
    "rapidws-ref": "#ff7f0e", "mem-scan": "#bcbd22", "mem-decoder": "#dbdb8d",
    "mem-connection": "#c7c7c7", "rapidws-handler-ref": "#c5b0d5", "rapidws-batch": "#8c564b",
    "mem-run": "#9edae5",
}


def load_csv(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def size_label(n):
    n = int(n)
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def kfmt(v):
    if v is None:
        return "–"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e3:
        return f"{v / 1e3:.0f}k"
    return f"{v:.0f}"


def ok(row):
    return row is not None and int(row["errors"]) == 0 and int(row["msgs"]) > 0


def client_bound(row):
    """The load tool used (nearly) all of its core: the server was not the bottleneck."""
    return float(row["client_cpu_s"]) >= 0.9 * float(row["seconds"])


class Echo:
    def __init__(self, rows):
        self.rows = {}
        for r in rows:
            key = (r["server"], r["payload"], int(r["size"]), int(r["conns"]),
                   int(r["inflight"]))
            self.rows[key] = r
        cells = sorted({k[1:] for k in self.rows},
                       key=lambda c: (c[3], c[0] != "binary", c[1], c[2]))
        self.cells = cells

    def get(self, server, cell):
        r = self.rows.get((server,) + cell)
        return r if ok(r) else None

    def val(self, server, cell, field):
        r = self.get(server, cell)
        return float(r[field]) if r else None

    def servers(self, candidates):
        present = {k[0] for k in self.rows}
        return [s for s in candidates if s in present]


def cell_label(cell):
    payload, size, conns, inflight = cell
    s = f"{size_label(size)} {payload}, {conns} conn{'s' if conns > 1 else ''}"
    if inflight > 1:
        s += f", {inflight} in flight"
    return s


# --------------------------------------------------------------------------- SVG

def svg_bars(path, title, unit, groups, series, log=False):
    """Horizontal grouped bar chart. groups: labels; series: [(name, [value or None])]."""
    bar_h, gap, left, right, top = 9, 10, 230, 90, 48
    width = 900
    n = len(series)
    group_h = n * bar_h + gap
    height = top + len(groups) * group_h + 20 + 16 * ((n + 3) // 4)
    vals = [v for _, vs in series for v in vs if v]
    vmax = max(vals) if vals else 1
    vmin = min(vals) if vals else 1
    plot_w = width - left - right
    if log:
        lo = 10 ** math.floor(math.log10(max(vmin, 1e-9)))
        hi = 10 ** math.ceil(math.log10(vmax))

        def x(v):
            return plot_w * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    else:
        hi = vmax * 1.05

        def x(v):
            return plot_w * v / hi
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" '
           f'font-weight="bold">{html.escape(title)}</text>',
           f'<text x="{width / 2}" y="34" text-anchor="middle" fill="#555">'
           f'{html.escape(unit)}{" (log scale)" if log else ""}</text>']
    # Grid.
    ticks = []
    if log:
        t = lo
        while t <= hi * 1.0001:
            ticks.append(t)
            t *= 10
    else:
        step = 10 ** math.floor(math.log10(hi / 4)) if hi > 0 else 1
        while hi / step > 8:
            step *= 2
        t = 0
        while t <= hi:
            ticks.append(t)
            t += step
    bottom = top + len(groups) * group_h
    for t in ticks:
        xx = left + x(t) if (t > 0 or not log) else left
        out.append(f'<line x1="{xx:.1f}" y1="{top - 4}" x2="{xx:.1f}" y2="{bottom}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{xx:.1f}" y="{bottom + 12}" text-anchor="middle" '
                   f'fill="#555">{kfmt(t)}</text>')
    for gi, g in enumerate(groups):
        y0 = top + gi * group_h
        out.append(f'<text x="{left - 6}" y="{y0 + n * bar_h / 2 + 4:.1f}" '
                   f'text-anchor="end">{html.escape(g)}</text>')
        for si, (name, vs) in enumerate(series):
            v = vs[gi]
            y = y0 + si * bar_h
            if not v:
                continue
            w = max(x(v), 1)
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 1}" '
                       f'fill="{COLORS.get(name, "#333")}"/>')
            out.append(f'<text x="{left + w + 3:.1f}" y="{y + bar_h - 1}" font-size="8" '
                       f'fill="#333">{kfmt(v)}</text>')
    # Legend.
    ly = bottom + 24
    for si, (name, _) in enumerate(series):
        lx = left + (si % 4) * 160
        yy = ly + (si // 4) * 16
        out.append(f'<rect x="{lx}" y="{yy - 9}" width="10" height="10" '
                   f'fill="{COLORS.get(name, "#333")}"/>')
        out.append(f'<text x="{lx + 14}" y="{yy}">{html.escape(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# --------------------------------------------------------------------------- tables

def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def rfmt(r):
    return "–" if r is None else f"{r:.2f}×"


def loopback_section(echo, meta, full):
    """The page's tables; the rest goes to `full` (TABLES.md)."""
    md, pipe, defl = [], [], []
    plain = echo.servers(PLAIN)
    peers = echo.servers(PEERS)
    cells_plain = [c for c in echo.cells if any(echo.get(s, c) for s in plain)]
    cells_single = [c for c in cells_plain if c[3] == 1]
    cells_pipe = [c for c in cells_plain if c[3] > 1]
    cells_deflate = [c for c in echo.cells if any(echo.get(s, c) for s in DEFLATE)]

    md.append(f"Command: `{meta.get('command', 'bash benches/run.sh')}` — "
              f"{meta.get('date', '?')}, git `{meta.get('git', '?')}`, {meta.get('rustc', '')}.  ")
    md.append(f"Machine: {meta.get('machine', '?')} ({meta.get('cpu', '?')}).  ")
    md.append(f"Per cell: {meta.get('warmup_s', '?')} s warm-up, {meta.get('measure_s', '?')} s "
              f"measured. Peers: {meta.get('peers', '?')}.  ")
    if meta.get("echo_seconds") is not None:
        md.append(f"Run time: {meta.get('seconds', '?')} s in all ({meta['echo_seconds']} s of "
                  f"echo cells, {meta.get('firehose_seconds', '?')} s of firehose); load "
                  f"average {meta.get('load_start', '?')} at the start, "
                  f"{meta.get('load_end', '?')} at the end.  ")
    if meta.get("skipped"):
        md.append(f"**{meta['skipped']} cell(s) skipped** for the descriptor limit (see "
                  "`benches/results/run.log`).  ")
    if meta.get("failures"):
        md.append(f"**{meta['failures']} cell(s) failed** (shown as –; see "
                  f"`benches/results/run.log`).  ")
    md.append("Raw rows: `benches/results/echo.csv`. † = the load tool used ≥ 90 % of its core "
              "in that cell, so the server may not have been the bottleneck (the per-CPU "
              "figure still holds).")
    # One paragraph: the lines above end in two spaces (a line break where rendered).
    md[:] = [" ".join(line.rstrip() for line in md)]
    md.append("")

    # Echoes per server CPU-second.
    if cells_single:
        md.append("### Echoes per server CPU-second, no compression (higher is better)")
        md.append("")
        md.append("![echoes per server CPU-second](echo_cpu.svg)")
        md.append("")
        ours = echo.servers(OURS)
        hdr = (["payload, connections"] + plain + [f"{o} / best peer" for o in ours]
               + [f"{o} / raw" for o in ours])
        rows = []
        for c in cells_single:
            vals = {s: echo.val(s, c, "echoes_per_cpu_s") for s in plain}
            best_peer = max((vals[s] for s in peers if vals[s]), default=None)
            best_lib = max((v for s, v in vals.items() if v and s != "raw-tcp"), default=None)
            row = [cell_label(c)]
            for s in plain:
                v = vals[s]
                txt = kfmt(v)
                if v is not None and v == best_lib:
                    txt = f"**{txt}**"
                r = echo.get(s, c)
                if r and client_bound(r):
                    txt += " †"
                row.append(txt)
            row += [rfmt(ratio(vals.get(o), best_peer)) for o in ours]
            row += [rfmt(ratio(vals.get(o), vals.get("raw-tcp"))) for o in ours]
            rows.append(row)
        md.append(table(hdr, rows))
        md.append("")
        svg_bars(os.path.join(HERE, "echo_cpu.svg"),
                 "Echoes per server CPU-second, no compression", "echoes / CPU-s",
                 [cell_label(c) for c in cells_single],
                 [(s, [echo.val(s, c, "echoes_per_cpu_s") for c in cells_single]) for s in plain],
                 log=True)

        full.append("## Echo messages per second, no compression (higher is better)")
        full.append("")
        full.append("![messages per second](../echo_rate.svg)")
        full.append("")
        rows = []
        for c in cells_single:
            row = [cell_label(c)]
            for s in plain:
                r = echo.get(s, c)
                row.append(kfmt(float(r["msgs_per_s"])) + (" †" if client_bound(r) else "")
                           if r else "–")
            rows.append(row)
        full.append(table(["payload, connections"] + plain, rows))
        full.append("")
        svg_bars(os.path.join(HERE, "echo_rate.svg"), "Echo messages per second, no compression",
                 "messages / s", [cell_label(c) for c in cells_single],
                 [(s, [echo.val(s, c, "msgs_per_s") for c in cells_single]) for s in plain],
                 log=True)

        full.append("## Echo round trip p50 / p99 in µs, no compression (lower is better)")
        full.append("")
        rows = []
        for c in cells_single:
            row = [cell_label(c)]
            for s in plain:
                r = echo.get(s, c)
                row.append(f"{float(r['p50_us']):.0f} / {float(r['p99_us']):.0f}" if r else "–")
            rows.append(row)
        full.append(table(["payload, connections"] + plain, rows))
        full.append("")

    if cells_pipe:
        pipe.append("Echoes per server CPU-second, no compression (higher is better):")
        pipe.append("")
        short = []
        for c in cells_pipe:
            vals = {s: echo.val(s, c, "echoes_per_cpu_s") for s in plain}
            best = max(((vals[p], p) for p in peers if vals[p]), default=(None, "–"))
            raw = vals.get("raw-tcp")
            short.append([cell_label(c)]
                         + [kfmt(vals.get(s)) for s in echo.servers(PIPELINED_OURS)]
                         + [f"{kfmt(best[0])} ({best[1]})", kfmt(raw)]
                         + [rfmt(ratio(vals.get(s), best[0])) for s in echo.servers(OURS)]
                         + [rfmt(ratio(vals.get(s), raw)) for s in echo.servers(OURS)])
        pipe.append(table(["cell"] + echo.servers(PIPELINED_OURS) + ["best peer", "raw-tcp"]
                        + [f"{o} / best peer" for o in echo.servers(OURS)]
                        + [f"{o} / raw" for o in echo.servers(OURS)], short))
        pipe.append("")
        for c in cells_pipe:
            full.append(f"## Pipelined: {cell_label(c)}")
            full.append("")
            rows = []
            servers = plain + echo.servers(DEFLATE)
            best_peer = max((echo.val(p, c, "echoes_per_cpu_s") or 0 for p in peers), default=0)
            raw = echo.val("raw-tcp", c, "echoes_per_cpu_s")
            for s in servers:
                r = echo.get(s, c)
                if not r:
                    continue
                v = float(r["echoes_per_cpu_s"])
                rows.append([s, kfmt(float(r["msgs_per_s"])), f"{float(r['mb_per_s']):.1f}",
                             f"{float(r['p50_us']):.0f} / {float(r['p99_us']):.0f}",
                             f"{float(r['server_user_s']):.2f} + {float(r['server_sys_s']):.2f}",
                             kfmt(v) + (" †" if client_bound(r) else ""),
                             rfmt(ratio(v, best_peer or None)), rfmt(ratio(v, raw))])
            full.append(table(["server", "msg/s", "MB/s", "p50 / p99 µs",
                               "server CPU s (user + sys)", "echoes / CPU-s", "/ best peer",
                               "/ raw TCP"], rows))
            full.append("")

    if cells_deflate:
        defl.append("![compression](echo_deflate.svg)")
        defl.append("")
        rows, short = [], []
        for c in cells_deflate:
            a = echo.get("rapidws-deflate", c)
            b = echo.get("yawc-deflate", c)
            av = float(a["echoes_per_cpu_s"]) if a else None
            bv = float(b["echoes_per_cpu_s"]) if b else None
            rows.append([cell_label(c), kfmt(av), kfmt(bv), rfmt(ratio(av, bv)),
                         f"{float(a['wire_bytes_per_echo']):.0f}" if a else "–",
                         f"{float(b['wire_bytes_per_echo']):.0f}" if b else "–",
                         kfmt(float(a["msgs_per_s"])) if a else "–",
                         kfmt(float(b["msgs_per_s"])) if b else "–"])
            short.append(rows[-1][:6])
        defl.append(table(["payload, connections", "rapidws echoes/CPU-s", "yawc echoes/CPU-s",
                         "rapidws / yawc", "rapidws wire B/echo", "yawc wire B/echo"], short))
        defl.append("")
        full.append("## permessage-deflate echo")
        full.append("")
        full.append(table(["payload, connections", "rapidws echoes/CPU-s", "yawc echoes/CPU-s",
                           "rapidws / yawc", "rapidws wire B/echo", "yawc wire B/echo",
                           "rapidws msg/s", "yawc msg/s"], rows))
        full.append("")
        svg_bars(os.path.join(HERE, "echo_deflate.svg"),
                 "Echoes per server CPU-second, permessage-deflate", "echoes / CPU-s",
                 [cell_label(c) for c in cells_deflate],
                 [(s, [echo.val(s, c, "echoes_per_cpu_s") for c in cells_deflate])
                  for s in echo.servers(DEFLATE)], log=True)
    return "\n".join(md), "\n".join(pipe), "\n".join(defl)


def idle_section(idle, meta):
    md = []
    rows = [r for r in idle if int(r["errors"]) == 0]
    if not rows:
        md.append("_No idle-memory run recorded yet._")
        return "\n".join(md)
    conns = rows[0]["conns"]
    md.append(f"Command: `{meta.get('command', 'bash benches/run.sh')}` — {meta.get('date', '?')}. "
              f"{int(conns):,} connections, each used for one 16-byte echo, then idle for 2 s; "
              "server VmRSS growth over its RSS before the first connection, divided by the "
              "connection count. Raw rows: `benches/results/idle.csv`.")
    md.append("")
    md.append("![idle memory per connection](idle_memory.svg)")
    md.append("")
    base = {r["server"]: float(r["bytes_per_conn"]) for r in rows}
    out = []
    for r in rows:
        per = float(r["bytes_per_conn"])
        tt = base.get("tokio-tungstenite")
        out.append([r["server"], f"{int(r['rss_before_bytes']) / 1048576:.1f}",
                    f"{int(r['rss_after_bytes']) / 1048576:.1f}", f"{per / 1024:.1f}",
                    rfmt(ratio(per, tt))])
    md.append(table(["server", "RSS before (MiB)", "RSS with idle conns (MiB)",
                     "KiB per connection", "vs tokio-tungstenite"], out))
    md.append("")
    svg_bars(os.path.join(HERE, "idle_memory.svg"), "Server memory per idle connection",
             "bytes / connection", [r["server"] for r in rows],
             [("bytes", [float(r["bytes_per_conn"]) for r in rows])])
    return "\n".join(md)


def targets_section(echo, idle, detail=True, kinds=None):
    """Each target met or not; with `detail`, the cells that miss it too. `kinds` picks the
    targets of one section of RESULTS.md (echo, pipelined, deflate, idle)."""
    md = ["### Targets", ""] if kinds is None else ["Targets:", ""]

    def add(kind, line):
        if kinds is None or kind in kinds:
            md.append(line)

    peers = echo.servers(PEERS)
    for ours in echo.servers(OURS):
        # 1. Every cell at least the best peer (per server CPU-second).
        lost, total = [], 0
        for c in echo.cells:
            mine = echo.val(ours, c, "echoes_per_cpu_s")
            best = max((echo.val(p, c, "echoes_per_cpu_s") or 0 for p in peers), default=0)
            if mine is None or best == 0:
                continue
            total += 1
            if mine < best:
                lost.append(f"{cell_label(c)} ({mine / best:.2f}×)")
        if total:
            add("echo", f"- `{ours}`: every cell ≥ best peer in echoes per server CPU-second: "
                      f"**{'met' if not lost else 'not met'}** ({total - len(lost)} of {total} "
                      "cells)" + (f"; behind in: {'; '.join(lost)}" if lost and detail else "")
                      + ".")
        # 2. Within 5 % of raw TCP, 16 B..16 KiB at 100 and 1,000 connections.
        near, checked, misses = 0, 0, []
        for c in echo.cells:
            if c[3] != 1 or c[1] > 16384 or c[2] not in (100, 1000):
                continue
            mine = echo.val(ours, c, "echoes_per_cpu_s")
            raw = echo.val("raw-tcp", c, "echoes_per_cpu_s")
            if mine is None or raw is None:
                continue
            checked += 1
            if mine >= 0.95 * raw:
                near += 1
            else:
                misses.append(f"{cell_label(c)} ({mine / raw:.2f}×)")
        if checked:
            add("echo", f"- `{ours}`: within 5 % of raw TCP (16 B–16 KiB, 100 and 1,000 "
                      f"connections): **{'met' if near == checked else 'not met'}** ({near} of "
                      f"{checked} cells)" + (f"; {ours} / raw: {'; '.join(misses)}"
                                              if misses and detail else "") + ".")
    # 3. Pipelined: >= 6x the best peer and >= 0.85x raw TCP, per server CPU-second.
    for ours in echo.servers(PIPELINED_OURS):
        pipe_met, pipe_n, pipe_notes = 0, 0, []
        for c in echo.cells:
            if c[3] == 1:
                continue
            mine = echo.val(ours, c, "echoes_per_cpu_s")
            best = max((echo.val(p, c, "echoes_per_cpu_s") or 0 for p in peers), default=0)
            raw = echo.val("raw-tcp", c, "echoes_per_cpu_s")
            if not mine or not best or not raw:
                continue
            met = mine >= 6 * best and mine >= 0.85 * raw
            pipe_n += 1
            pipe_met += met
            pipe_notes.append(f"{mine / best:.2f}× / {mine / raw:.2f}×")
            if not detail:
                continue
            add("pipelined", f"- `{ours}`: pipelined ({cell_label(c)}) ≥ 6× best peer and ≥ 0.85× raw "
                      f"TCP: **{'met' if met else 'not met'}** ({mine / best:.2f}× best peer, "
                      f"{mine / raw:.2f}× raw TCP, in echoes per server CPU-second).")
        if pipe_n and not detail:
            add("pipelined", f"- `{ours}`: pipelined ≥ 6× best peer and ≥ 0.85× raw TCP: "
                      f"**{'met' if pipe_met == pipe_n else 'not met'}** ({pipe_met} of "
                      f"{pipe_n} cells; best peer / raw: {', '.join(pipe_notes)}).")
    # 4. Compression >= 3x yawc at no larger wire size.
    good, n, notes = 0, 0, []
    for c in echo.cells:
        a = echo.get("rapidws-deflate", c)
        b = echo.get("yawc-deflate", c)
        if not a or not b:
            continue
        n += 1
        r = float(a["echoes_per_cpu_s"]) / float(b["echoes_per_cpu_s"])
        wa, wb = float(a["wire_bytes_per_echo"]), float(b["wire_bytes_per_echo"])
        if r >= 3 and wa <= wb:
            good += 1
        else:
            notes.append(f"{cell_label(c)} ({r:.2f}×, wire {wa:.0f} vs {wb:.0f} B)")
    if n:
        add("deflate", f"- Compression ≥ 3× yawc per server CPU-second at no larger wire size: "
                  f"**{'met' if good == n else 'not met'}** ({good} of {n} cells)"
                  + (f"; short in: {'; '.join(notes)}" if notes and detail else "") + ".")
    # 5. Idle memory <= 1/10 of tokio-tungstenite.
    per = {r["server"]: float(r["bytes_per_conn"]) for r in idle if int(r["errors"]) == 0}
    if "rapidws" in per and per.get("tokio-tungstenite"):
        r = per["rapidws"] / per["tokio-tungstenite"]
        add("idle", f"- Idle memory per connection ≤ 1/10 of tokio-tungstenite: "
                  f"**{'met' if r <= 0.1 else 'not met'}** ({per['rapidws'] / 1024:.1f} KiB vs "
                  f"{per['tokio-tungstenite'] / 1024:.1f} KiB, {r:.3f}×).")
    if kinds is not None:
        # One paragraph for a section of RESULTS.md; TABLES.md has the list.
        return "" if len(md) == 2 else "Targets: " + " ".join(line[2:] for line in md[2:])
    if len(md) == 2:
        md.append("_Nothing measured yet._")
    return "\n".join(md)


def firehose_section(rows, meta, full):
    md = []
    # Each client's best round (run.sh repeats every run FH_ROUNDS times, in a new order
    # each round); `runs` keeps all of them for the spread in TABLES.md.
    good = {}
    runs = {}
    for r in rows:
        if int(r["errors"]) == 0 and int(r["msgs"]) > 0:
            key = (r["client"], r["size"])
            runs.setdefault(key, []).append(float(r["msgs_per_cpu_s"]))
            if key not in good or float(r["msgs_per_cpu_s"]) > float(good[key]["msgs_per_cpu_s"]):
                good[key] = r
    if not good:
        md.append("_No firehose run recorded yet._")
        return "\n".join(md)
    sizes = []
    for r in rows:
        if r["size"] not in sizes:
            sizes.append(r["size"])
    present = {k[0] for k in good}
    clients = [c for c in FH_OURS + FH_PEERS + FH_MEM if c in present]
    ours = [c for c in FH_OURS if c in present]
    peers = [c for c in FH_PEERS if c in present]
    md.append(f"Command: `{meta.get('command', 'bash benches/run.sh')}` — {meta.get('date', '?')}, "
              f"git `{meta.get('git', '?')}`. Per run: {meta.get('firehose_warmup_s', '?')} s "
              f"warm-up, {meta.get('firehose_measure_s', '?')} s measured; "
              f"{meta.get('firehose_rounds', 1)} rounds, every client once per size in each, "
              "in a new order; each cell is the client's best round (TABLES.md has the "
              "spread). One connection; "
              "`firehose_server` (core 0) writes pre-encoded unmasked text frames of JSON-like "
              "payloads in 256 KiB writes; the client (core 1) checks every message (text, size, "
              "first byte). `mem-*` read the same bytes in memory, no socket: `frame::scan` "
              "(headers only), `codec::Decoder` (all RFC 6455 checks and UTF-8), the sans-IO "
              "`Connection` (64 KiB per `handle_bytes`). CPU is the client process's own user + "
              "system time. Raw rows: `benches/results/firehose.csv`. † = the client used less "
              "than 90 % of its core while the server was not busy either: other processes on "
              "this shared machine had the core at times (the per-CPU figure still holds). "
              "‡ = the server used at least 90 % of its core: it may have been the bottleneck, "
              "and the client's reads were smaller. § = under 0.2 client CPU-seconds were "
              "measured, so the 10 ms clock tick alone makes that figure ±5 % or worse.")
    md.append("")
    md.append("### Messages per client CPU-second (higher is better)")
    md.append("")
    md.append("![firehose](firehose.svg)")
    md.append("")

    def val(c, size):
        r = good.get((c, size))
        return float(r["msgs_per_cpu_s"]) if r else None

    hdr = (["message size (B)"] + clients + [f"{o} / best peer" for o in ours]
           + ["best rapidws / mem-scan", "best rapidws / mem-decoder"])
    out = []
    for size in sizes:
        best_peer = max((val(p, size) or 0 for p in peers), default=0) or None
        best_ours = max((val(o, size) or 0 for o in ours), default=0) or None
        row = [size]
        for c in clients:
            r = good.get((c, size))
            if not r:
                row.append("–")
                continue
            cpu = float(r["client_user_s"]) + float(r["client_sys_s"])
            secs = float(r["seconds"])
            txt = kfmt(float(r["msgs_per_cpu_s"]))
            if float(r.get("server_cpu_s") or 0) >= 0.9 * secs:
                txt += " ‡"
            elif not c.startswith("mem-") and cpu < 0.9 * secs:
                txt += " †"
            if cpu < 0.2:
                txt += " §"
            row.append(txt)
        row += [rfmt(ratio(val(o, size), best_peer)) for o in ours]
        row += [rfmt(ratio(best_ours, val("mem-scan", size))),
                rfmt(ratio(best_ours, val("mem-decoder", size)))]
        out.append(row)
    md.append(table(hdr, out))
    md.append("")
    def grid(title, cell):
        """A client x size table of TABLES.md: `cell(client, size)`, or "–" for `None`."""
        full.append(title)
        full.append("")
        out = [[size] + [cell(c, size) or "–" for c in clients] for size in sizes]
        full.append(table(["message size (B)"] + clients, out))
        full.append("")

    def rates(c, size):
        r = good.get((c, size))
        if not r:
            return None
        txt = (f"{kfmt(float(r['msgs_per_s']))}; {float(r['client_user_s']):.2f} + "
               f"{float(r['client_sys_s']):.2f}")
        if not c.startswith("mem-"):
            txt += f"; {float(r.get('server_cpu_s') or 0):.2f}"
        return txt

    def spread(c, size):
        v = runs.get((c, size))
        return f"{kfmt(min(v))}-{kfmt(max(v))} ({len(v)})" if v else None

    grid("## Firehose: messages per second; client CPU seconds (user + system), "
         "server CPU seconds", rates)
    grid("## Firehose: messages per client CPU-second, every round (worst-best)", spread)
    # Targets: >= 2x the best peer at 64 and 256 B; within 2x of frame::scan in memory.
    targets = []
    for size in [s for s in ("64", "256") if s in sizes]:
        best_peer = max((val(p, size) or 0 for p in peers), default=0)
        scan = val("mem-scan", size)
        for o in ours:
            mine = val(o, size)
            if not mine or not best_peer:
                continue
            targets.append(f"`{o}` at {size} B: ≥ 2× the best peer client: "
                      f"**{'met' if mine >= 2 * best_peer else 'not met'}** "
                      f"({mine / best_peer:.2f}×); within 2× of `frame::scan` in memory: "
                      + (f"**{'met' if mine >= 0.5 * scan else 'not met'}** "
                         f"({mine / scan:.3f}× of it)." if scan else "not measured."))
    if targets:
        md.append("Targets: " + " ".join(targets))
        full.append("## Firehose targets")
        full.append("")
        full += [f"- {t}" for t in targets]
        full.append("")
    series = [(c, [val(c, size) for size in sizes]) for c in clients]
    svg_bars(os.path.join(HERE, "firehose.svg"), "Firehose: messages per client CPU-second",
             "messages / client CPU-s", [f"{size} B" for size in sizes], series, log=True)
    return "\n".join(md)


def replace_block(text, name, body):
    begin = f"<!-- BEGIN {name}: generated by benches/plot.py from benches/results/; do not edit -->"
    end = f"<!-- END {name} -->"
    block = f"{begin}\n{body}\n{end}"
    pat = re.compile(re.escape(f"<!-- BEGIN {name}:") + r".*?" + re.escape(end), re.S)
    if pat.search(text):
        return pat.sub(lambda _: block, text)
    return None


def main():
    echo = Echo(load_csv("echo.csv"))
    idle = load_csv("idle.csv")
    meta_path = os.path.join(RESULTS, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    full = ["# Loopback benchmark tables in full", "",
            "<!-- generated by benches/plot.py from benches/results/; do not edit -->", "",
            f"Command: `{meta.get('command', 'bash benches/run.sh')}` — {meta.get('date', '?')}, "
            f"git `{meta.get('git', '?')}`. The method, the machine and the headline tables are "
            "in [benches/RESULTS.md](../RESULTS.md).", ""]
    echo_md, pipe_md, defl_md = loopback_section(echo, meta, full)

    def with_targets(body, kind):
        return body.rstrip("\n") + "\n\n" + targets_section(echo, idle, detail=False,
                                                             kinds={kind})

    blocks = (("loopback", with_targets(echo_md, "echo"), "## Echo matrix"),
              ("pipelined", with_targets(pipe_md, "pipelined"), "## Pipelined echo"),
              ("deflate-echo", with_targets(defl_md, "deflate"), "## Echo with permessage-deflate"),
              ("idle", with_targets(idle_section(idle, meta), "idle"),
               "## Idle memory per connection"),
              ("firehose", firehose_section(load_csv("firehose.csv"), meta, full),
               "## Firehose client"))
    full.append("## " + targets_section(echo, idle).removeprefix("### "))
    with open(TABLES_MD, "w") as f:
        f.write("\n".join(full).rstrip("\n") + "\n")
    text = open(RESULTS_MD).read() if os.path.exists(RESULTS_MD) else "# Benchmark results\n"
    for name, body, heading in blocks:
        new = replace_block(text, name, body)
        if new is None:
            text = (text.rstrip("\n") + f"\n\n{heading}\n\n<!-- BEGIN {name}: generated by "
                    f"benches/plot.py from benches/results/; do not edit -->\n{body}\n"
                    f"<!-- END {name} -->\n")
        else:
            text = new
    with open(RESULTS_MD, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(RESULTS_MD)}, {os.path.relpath(TABLES_MD)} and the SVG charts",
          file=sys.stderr)


if __name__ == "__main__":
    main()
