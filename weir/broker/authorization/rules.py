"""Every served API's authorization rule: Kafka 4.4's per-API checks (KafkaApis),
declared once per API. An API with no rule is refused (the connection closes)."""

from __future__ import annotations

from weir.broker.authorization.gate import Rule

RULES: dict[int, Rule] = {}
