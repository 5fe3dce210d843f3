"""Every setting has one home, is read, and is documented.

A setting is a field of `BrokerConfig`, of a layer's settings dataclass it
composes (`GroupSettings`, `LogSettings`), of `Limits`, or a topic config in
`TOPIC_CONFIGS`. "Read" means an attribute access of that name somewhere in
`weir/` (an AST scan; declarations are annotated assignments, not accesses,
and `Class.field` default references do not count). "Documented" means
docs/user-guide.md names it as a user writes it: the TOML key (plus the flag
and `WEIR_` variable where there is one), `limits.`-table keys, Kafka's topic
config names."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from weir.broker.config import ENV_PREFIX, FLAG_NAMES, BrokerConfig, Limits, load_config
from weir.broker.security_config import SecurityConfig
from weir.groupcoord.settings import GroupSettings
from weir.log.config import TOPIC_CONFIGS, InvalidConfig, LogConfig
from weir.log.settings import LogSettings
from weir.txn.transaction_coordinator import TransactionSettings

ROOT = Path(__file__).resolve().parents[1]
USER_GUIDE = ROOT / "docs" / "user-guide.md"
SETTINGS_CLASSES: tuple[type[Any], ...] = (
    BrokerConfig,
    Limits,
    GroupSettings,
    LogSettings,
    TransactionSettings,
    LogConfig,
    SecurityConfig,
)
# Topic configs stored and reported (DescribeConfigs) so that Kafka tools can set
# them, and read by nothing (weir/log/config.py's docstring says why).
ACCEPTED_WITHOUT_EFFECT = frozenset({
    "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "message.downconversion.enable",
    "preallocate",
})  # fmt: skip
# Topic configs whose validators accept only the value that is Weir's behaviour.
ONE_VALUE_ONLY = frozenset({"remote.storage.enable"})
# Fields that hold other settings, not settings themselves.
CONTAINER_FIELDS = {
    (BrokerConfig, "limits"),
    (BrokerConfig, "security"),
    (LogConfig, "overrides"),
    (SecurityConfig, "listener_list"),
}


def setting_fields(cls: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if (cls, f.name) not in CONTAINER_FIELDS]


@cache
def attributes_read_in_weir() -> frozenset[str]:
    class_names = {cls.__name__ for cls in SETTINGS_CLASSES}
    read: set[str] = set()
    for path in (ROOT / "weir").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in class_names:
                continue  # a default taken from the layer's declaration
            read.add(node.attr)
    return frozenset(read)


def settings_and_fields() -> Iterator[tuple[str, str]]:
    for cls in (
        BrokerConfig,
        Limits,
        GroupSettings,
        LogSettings,
        TransactionSettings,
        SecurityConfig,
    ):
        for name in setting_fields(cls):
            yield cls.__name__, name


@pytest.mark.parametrize(("owner", "name"), list(settings_and_fields()))
def test_every_setting_is_read_outside_its_declaration(owner: str, name: str) -> None:
    assert name in attributes_read_in_weir(), f"{owner}.{name} is declared but never read"


@pytest.mark.parametrize(
    "name", sorted(set(TOPIC_CONFIGS) - ACCEPTED_WITHOUT_EFFECT - ONE_VALUE_ONLY)
)
def test_every_topic_config_with_an_effect_is_read(name: str) -> None:
    assert TOPIC_CONFIGS[name].attribute in attributes_read_in_weir(), name


@pytest.mark.parametrize("name", sorted(ACCEPTED_WITHOUT_EFFECT))
def test_topic_configs_accepted_without_effect_are_really_not_read(name: str) -> None:
    assert name in TOPIC_CONFIGS
    assert TOPIC_CONFIGS[name].attribute not in attributes_read_in_weir(), (
        f"{name} is read: remove it from ACCEPTED_WITHOUT_EFFECT and document its effect"
    )


@pytest.mark.parametrize("name", sorted(ONE_VALUE_ONLY))
def test_topic_configs_with_one_allowed_value_refuse_any_other(name: str) -> None:
    definition = TOPIC_CONFIGS[name]
    other = "true" if definition.default is False else "gzip"
    with pytest.raises(InvalidConfig):
        definition.parse(other)


def user_guide() -> str:
    return USER_GUIDE.read_text()


def names_a_key(text: str, key: str) -> bool:
    """`key` in code quotes, or as a key in a TOML example (`key = ...`)."""
    pattern = rf"`{re.escape(key)}`|^{re.escape(key)} *="
    return re.search(pattern, text, re.MULTILINE) is not None


@pytest.mark.parametrize("name", setting_fields(BrokerConfig))
def test_every_broker_setting_is_documented_as_a_file_key(name: str) -> None:
    assert names_a_key(user_guide(), name), f"docs/user-guide.md does not name {name!r}"


@pytest.mark.parametrize("name", [n for n in FLAG_NAMES if n != "config"])
def test_every_flag_setting_is_documented_with_its_flag_and_variable(name: str) -> None:
    text = user_guide()
    assert f"`--{name.replace('_', '-')}`" in text
    assert f"`{ENV_PREFIX}{name.upper()}`" in text


@pytest.mark.parametrize("name", setting_fields(Limits))
def test_every_limit_is_documented_in_the_limits_table(name: str) -> None:
    limits_table = user_guide().split("[limits]", 1)[1].split("```", 1)[0]
    assert names_a_key(limits_table, name), f"[limits] example lacks {name}"


@pytest.mark.parametrize("name", setting_fields(SecurityConfig))
def test_every_security_setting_is_documented_in_the_security_table(name: str) -> None:
    security_table = user_guide().split("[security]", 1)[1].split("```", 1)[0]
    assert names_a_key(security_table, name), f"[security] example lacks {name}"


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_every_topic_config_is_documented(name: str) -> None:
    assert f"`{name}`" in user_guide(), f"docs/user-guide.md does not name topic config {name}"


def test_topic_config_table_says_which_configs_have_no_effect() -> None:
    rows = re.findall(r"^\| `([a-z.]+)` \| `[^`]*` \| (.*) \|$", user_guide(), re.MULTILINE)
    without_effect = {name for name, effect in rows if effect.startswith("accepted, no effect")}
    assert without_effect == ACCEPTED_WITHOUT_EFFECT


def test_topic_config_table_shows_the_catalog_defaults() -> None:
    rows = re.findall(r"^\| `([a-z.]+)` \| `([^`]*)` \|", user_guide(), re.MULTILINE)
    documented = dict(rows)
    for name, definition in TOPIC_CONFIGS.items():
        assert documented.get(name) == definition.format(definition.default), name


def test_broker_defaults_are_the_layers_defaults() -> None:
    config = BrokerConfig()
    assert config.group_settings() == GroupSettings()
    assert config.log_settings() == LogSettings()
    assert config.transaction_settings() == TransactionSettings()


@pytest.mark.parametrize(
    ("layer", "build"),
    [
        (GroupSettings, BrokerConfig.group_settings),
        (LogSettings, BrokerConfig.log_settings),
        (TransactionSettings, BrokerConfig.transaction_settings),
    ],
)
def test_every_layer_setting_is_set_by_a_broker_setting(layer: type[Any], build: Any) -> None:
    """Changing the broker settings one at a time changes every layer field."""
    defaults = build(BrokerConfig())
    reached: set[str] = set()
    for name in setting_fields(BrokerConfig):
        value = getattr(BrokerConfig(), name)
        if isinstance(value, bool):
            changed = not value
        elif isinstance(value, int):
            changed = value + 1
        elif name in OTHER_STRING_VALUES:
            changed = OTHER_STRING_VALUES[name]
        else:
            continue
        built = build(dataclasses.replace(BrokerConfig(), **{name: changed}))
        reached |= {f for f in setting_fields(layer) if getattr(built, f) != getattr(defaults, f)}
    assert reached == set(setting_fields(layer))


# A valid value other than the default, for the settings that are strings of a kind.
OTHER_STRING_VALUES = {
    "fsync_method": "fdatasync",
    "share_auto_offset_reset": "by_duration:PT1H",
    "share_isolation_level": "read_committed",
    "errors_deadletterqueue_topic_name_prefix": "",
}
# Lower bounds already at Kafka's floor: raised instead (still below what they bound).
AT_THE_FLOOR = frozenset({
    "group_share_min_delivery_count_limit",
    "group_share_min_partition_max_record_locks",
    "group_share_min_assignment_interval_ms",
})  # fmt: skip


def file_value(name: str, default: object) -> str:
    """A TOML value for `name` other than its default (a lower bound is lowered,
    so that the setting it bounds stays within it, unless it is at Kafka's floor)."""
    if isinstance(default, bool):
        return "false" if default else "true"
    if name == "transaction_version":
        return "1"  # 1 or 2 only
    if isinstance(default, int):
        lowered = "_min_" in name and name not in AT_THE_FLOOR
        return str(default - 1 if lowered else default + 1)
    if name in OTHER_STRING_VALUES:
        return f'"{OTHER_STRING_VALUES[name]}"'
    if name == "data_dir":
        return '"/elsewhere"'
    if name == "etcd":
        return '"http://127.0.0.1:2379"'
    return '"192.0.2.1:1234"'  # the addresses


@pytest.mark.parametrize("name", setting_fields(BrokerConfig))
def test_every_broker_setting_can_be_set_in_the_config_file(tmp_path: Path, name: str) -> None:
    default = getattr(BrokerConfig(), name)
    settings = tmp_path / "weir.toml"
    settings.write_text(f"{name} = {file_value(name, default)}\n")
    assert getattr(load_config(["--config", str(settings)], {}), name) != default


@pytest.mark.parametrize("name", setting_fields(Limits))
def test_every_limit_can_be_set_in_the_config_file(tmp_path: Path, name: str) -> None:
    default = getattr(Limits(), name)
    settings = tmp_path / "weir.toml"
    settings.write_text(f"[limits]\n{name} = {default + 1}\n")
    assert getattr(load_config(["--config", str(settings)], {}).limits, name) == default + 1
