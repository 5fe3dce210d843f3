"""`--security plaintext,sasl_ssl`: every broker over each security protocol in the
same run, and what SASL_SSL costs it against PLAINTEXT (throughput and broker CPU
per message), with each broker's ratio side by side. Medians over the rounds with
their range; a ratio is the ratio of the medians, with the range of the per-round
ratios (a round's PLAINTEXT and SASL_SSL passes of one broker run back to back)."""

from __future__ import annotations

import statistics
from typing import Any

from side_by_side.report import fmt
from side_by_side.secured import PLAINTEXT, SASL_MECHANISM

# (generator, label, phase key in a pass's sample)
PHASES = (
    ("confluent", "produce", "produce"),
    ("confluent", "consume", "consume"),
    ("kafka-tools", "produce", "tool_produce"),
    ("kafka-tools", "consume", "tool_consume"),
)
FIGURES = (("msgs_per_s", "msgs/s", 0), ("broker_cpu_us_per_message", "broker CPU µs/msg", 2))


def _values(
    passes: list[dict[str, Any]], broker: str, security: str, size: int, phase: str, metric: str
) -> dict[int, float]:
    """round -> value, from the passes that measured it."""
    out: dict[int, float] = {}
    for p in passes:
        if p["broker"] != broker or p.get("security", PLAINTEXT) != security or p.get("profile"):
            continue
        value = p["sizes"].get(str(size), {}).get(phase, {}).get(metric)
        if value is not None:
            out[p["round"]] = value
    return out


def _spread(values: list[float], digits: int) -> str:
    if not values:
        return "—"
    middle = fmt(statistics.median(values), digits)
    if len(values) == 1:
        return middle
    return f"{middle} ({fmt(min(values), digits)}–{fmt(max(values), digits)})"


def _cell(
    passes: list[dict[str, Any]],
    broker: str,
    security: str,
    size: int,
    phase: str,
    metric: str,
    digits: int,
) -> str:
    return _spread(list(_values(passes, broker, security, size, phase, metric).values()), digits)


def security_ratio(
    passes: list[dict[str, Any]], broker: str, security: str, size: int, phase: str, metric: str
) -> tuple[float | None, list[float]]:
    """(median over `security` / median over PLAINTEXT, the per-round ratios)."""
    plain = _values(passes, broker, PLAINTEXT, size, phase, metric)
    secured = _values(passes, broker, security, size, phase, metric)
    per_round = [secured[r] / plain[r] for r in sorted(plain.keys() & secured.keys()) if plain[r]]
    if not plain or not secured or not statistics.median(plain.values()):
        return None, per_round
    return statistics.median(secured.values()) / statistics.median(plain.values()), per_round


def _ratio_text(ratio: float | None, per_round: list[float]) -> str:
    if ratio is None:
        return "—"
    if len(per_round) < 2:
        return f"{ratio:.2f}×"
    return f"{ratio:.2f}× ({min(per_round):.2f}–{max(per_round):.2f})"


def security_report_lines(result: dict[str, Any]) -> list[str]:
    args = result["args"]
    passes = result["passes"]
    brokers, sizes, generators = args["brokers"], args["sizes"], args["generators"]
    secured_modes = [m for m in args["security"] if m != PLAINTEXT]
    phases = [(g, label, key) for g, label, key in PHASES if g in generators]
    lines = [
        "",
        f"Security protocols, same run: {', '.join(m.upper() for m in args['security'])} "
        f"({SASL_MECHANISM} over TLS, the ACL authorizer on, the generators logged in as a "
        f"super user; PLAINTEXT = the broker with nothing configured). Median of "
        f"{args['rounds']} rounds (min–max); {args['messages']:,} messages per size with "
        f"confluent-kafka, {args['tool_messages']:,} with Kafka's perf tools; "
        f"{args['partitions']} partitions, acks={args['acks']}.",
        "",
        "| broker | protocol | generator | size | produce msgs/s | consume msgs/s "
        "| broker CPU µs/msg produce | broker CPU µs/msg consume |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for broker in brokers:
        for security in args["security"]:
            for generator in dict.fromkeys(g for g, _l, _k in phases):
                produce, consume = [k for g, _l, k in phases if g == generator]
                for size in sizes:
                    where = (passes, broker, security, size)
                    lines.append(
                        f"| {broker} | {security.upper()} | {generator} | {size} B "
                        f"| {_cell(*where, produce, 'msgs_per_s', 0)} "
                        f"| {_cell(*where, consume, 'msgs_per_s', 0)} "
                        f"| {_cell(*where, produce, 'broker_cpu_us_per_message', 2)} "
                        f"| {_cell(*where, consume, 'broker_cpu_us_per_message', 2)} |"
                    )
    for security in secured_modes:
        header = " | ".join(f"{b} {security.upper()}/PLAINTEXT" for b in brokers)
        lines += [
            "",
            f"{security.upper()} / PLAINTEXT, each broker (throughput below 1 = slower over "
            f"{security.upper()}; CPU per message above 1 = dearer). Ratio of the medians "
            "(range of the per-round ratios):",
            "",
            f"| figure | generator | phase | size | {header} |",
            "|---|---|---|---:|" + "---:|" * len(brokers),
        ]
        for metric, metric_label, _digits in FIGURES:
            for generator, label, key in phases:
                for size in sizes:
                    ratios = [
                        _ratio_text(*security_ratio(passes, b, security, size, key, metric))
                        for b in brokers
                    ]
                    lines.append(
                        f"| {metric_label} | {generator} | {label} | {size} B "
                        f"| {' | '.join(ratios)} |"
                    )
    loads = [
        f"{p['broker']} {p.get('security', PLAINTEXT)} r{p['round']} {p['loadavg_start'][0]:.2f}"
        for p in passes
        if p.get("loadavg_start") and not p.get("profile")
    ]
    if loads:
        lines += ["", f"1-minute load average when each pass started: {', '.join(loads)}."]
    errors = [
        f"{p['broker']} {p.get('security', PLAINTEXT)} r{p['round']}: {message}"
        for p in passes
        for message in [p.get("error"), p.get("warmup", {}).get("error")]
        + [s.get("error") for s in p["sizes"].values()]
        if message
    ]
    if errors:
        lines += ["", "**Errors:**", ""]
        lines += [f"- {e.splitlines()[0][:300]}" for e in errors]
    return lines
