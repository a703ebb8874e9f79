#!/usr/bin/env python3
"""Summarize an Autobahn testsuite report and check it against committed expectations.

    python3 autobahn/summarize.py REPORT_DIR/index.json --expected autobahn/expected/server.json
    python3 autobahn/summarize.py REPORT_DIR/index.json --expected ... --write-expected
    python3 autobahn/summarize.py REPORT_DIR/index.json --expected ... --subset

Prints, per case group (the first component of the case id, e.g. "6" for 6.4.3), how many
cases ended with each `behavior` and each `behaviorClose`, then lists every case that is
not strict. Exits non-zero when:

  * any case's behavior is FAILED, NON-STRICT, UNIMPLEMENTED (or anything but OK and
    INFORMATIONAL, e.g. WRONG CODE),
  * any case's behaviorClose is anything but OK or INFORMATIONAL (FAILED, WRONG CODE,
    UNCLEAN, FAILED BY CLIENT, ...),
  * the normalized results (case -> behavior + behaviorClose; durations and report file
    names dropped) differ from the expected file. With --subset, cases missing from the
    report are not counted as a difference (for runs that exclude case groups, such as
    `run.sh --quick`); every case that was run must still match.

With --write-expected the normalized results are written to the expected file instead of
compared (the strictness checks still run and still decide the exit code).

The index.json is the one wstest writes: {agent: {case_id: {"behavior", "behaviorClose",
"duration", "remoteCloseCode", "reportfile"}}}. It must hold exactly one agent.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

STRICT_BEHAVIOR = {"OK", "INFORMATIONAL"}
STRICT_CLOSE = {"OK", "INFORMATIONAL"}
# Column order for the table; anything else found in a report is appended after these.
BEHAVIOR_COLUMNS = ["OK", "INFORMATIONAL", "NON-STRICT", "FAILED", "UNIMPLEMENTED"]


def case_key(case_id: str) -> tuple[int, ...]:
    """Sort key that orders 1.1.10 after 1.1.9."""
    return tuple(int(part) for part in case_id.split("."))


def load_results(index_path: Path) -> tuple[str, dict[str, dict[str, str]]]:
    """Returns (agent, {case_id: {"behavior", "behaviorClose"}}) sorted by case id."""
    with index_path.open() as f:
        index = json.load(f)
    if not isinstance(index, dict) or len(index) != 1:
        agents = sorted(index) if isinstance(index, dict) else index
        raise SystemExit(f"{index_path}: expected exactly one agent, found {agents!r}")
    (agent, cases), = index.items()
    if not cases:
        raise SystemExit(f"{index_path}: agent {agent!r} has no cases")
    results = {}
    for case_id in sorted(cases, key=case_key):
        entry = cases[case_id]
        results[case_id] = {
            "behavior": entry["behavior"],
            "behaviorClose": entry["behaviorClose"],
        }
    return agent, results


def format_results(results: dict[str, dict[str, str]]) -> str:
    """One case per line, so a changed case shows up as a one-line diff."""
    lines = []
    for case_id in sorted(results, key=case_key):
        r = results[case_id]
        entry = json.dumps({"behavior": r["behavior"], "behaviorClose": r["behaviorClose"]})
        lines.append(f"  {json.dumps(case_id)}: {entry}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def print_table(agent: str, results: dict[str, dict[str, str]]) -> None:
    groups: dict[str, list[dict[str, str]]] = {}
    for case_id, r in results.items():
        groups.setdefault(case_id.split(".")[0], []).append(r)

    behaviors = list(BEHAVIOR_COLUMNS)
    closes: list[str] = ["OK", "INFORMATIONAL"]
    for r in results.values():
        if r["behavior"] not in behaviors:
            behaviors.append(r["behavior"])
        if r["behaviorClose"] not in closes:
            closes.append(r["behaviorClose"])

    header = ["group", "cases"] + behaviors + [f"close:{c}" for c in closes]
    rows = []
    for group in sorted(groups, key=int):
        rs = groups[group]
        b = Counter(r["behavior"] for r in rs)
        c = Counter(r["behaviorClose"] for r in rs)
        rows.append([group, str(len(rs))] + [str(b[x]) for x in behaviors] + [str(c[x]) for x in closes])
    b = Counter(r["behavior"] for r in results.values())
    c = Counter(r["behaviorClose"] for r in results.values())
    rows.append(["all", str(len(results))] + [str(b[x]) for x in behaviors] + [str(c[x]) for x in closes])

    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(f"Autobahn results for agent {agent!r}:")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", type=Path, help="index.json written by wstest")
    parser.add_argument("--expected", type=Path, required=True, help="committed expected results (JSON)")
    parser.add_argument("--write-expected", action="store_true", help="(re)write the expected file from this report")
    parser.add_argument("--subset", action="store_true", help="cases absent from the report are not a difference")
    args = parser.parse_args(argv)

    agent, results = load_results(args.index)
    print_table(agent, results)

    problems: list[str] = []
    for case_id, r in results.items():
        if r["behavior"] not in STRICT_BEHAVIOR:
            problems.append(f"case {case_id}: behavior {r['behavior']}")
        if r["behaviorClose"] not in STRICT_CLOSE:
            problems.append(f"case {case_id}: behaviorClose {r['behaviorClose']}")

    if args.write_expected:
        args.expected.parent.mkdir(parents=True, exist_ok=True)
        args.expected.write_text(format_results(results))
        print(f"wrote {len(results)} cases to {args.expected}")
    elif not args.expected.exists():
        problems.append(
            f"no expected results at {args.expected}; after checking a full run by hand, create it with "
            f"`python3 autobahn/summarize.py {args.index} --expected {args.expected} --write-expected`"
        )
    else:
        with args.expected.open() as f:
            expected = json.load(f)
        for case_id in sorted(set(expected) | set(results), key=case_key):
            want, got = expected.get(case_id), results.get(case_id)
            if got is None:
                if not args.subset:
                    problems.append(f"case {case_id}: expected {want}, but it is missing from the report")
            elif want is None:
                problems.append(f"case {case_id}: got {got}, but it is not in {args.expected}")
            elif want != got:
                problems.append(f"case {case_id}: expected {want}, got {got}")
        compared = len(set(expected) & set(results))
        print(f"compared {compared} cases with {args.expected}")

    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print(f"  {p}")
        print("autobahn: FAILED")
        return 1
    print("autobahn: all cases strict" + ("" if args.write_expected else " and as expected"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
