"""Where a client command's connection settings come from, and what they add up to.

Settings are librdkafka's `key=value` properties (see `client_security.py` for their
meaning), given as kcat takes them:

- `-F FILE` (kcat's `-F`; `--command-config`, the Kafka tools' spelling): a properties
  file, one `key=value` (or `key: value`) a line, `#` and `!` comment lines; without
  `-F`, the file named by `WEIR_CLIENT_CONFIG`, if set;
- `-X key=value`, repeatable, applied after the file (the last value of a key wins).

Besides the security settings, `bootstrap.servers` (kcat's `metadata.broker.list`)
names the brokers when `-b` does not, and `sasl.jaas.config`, as a Kafka tools'
`--command-config` file carries it, gives `sasl.username` and `sasl.password` from its
`username="..."` and `password="..."` options. An unknown key, a Java keystore setting
or SASL/TLS settings without `security.protocol` are one-line errors; no error shows a
setting's value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from weir.cli.arguments import CLIENT_CONFIG_ENV
from weir.cli.client_security import PROPERTY_NAMES, ClientSecurity, parse_client_properties
from weir.cli.errors import CliError

BOOTSTRAP_KEYS = frozenset({"bootstrap.servers", "metadata.broker.list"})
PROTOCOL_KEY = "security.protocol"
JAAS_KEY = "sasl.jaas.config"
# The settings only a secured protocol uses: given without security.protocol (so the
# connection would be PLAINTEXT), they are almost surely a forgotten protocol.
SECURED_PREFIXES = ("sasl.", "ssl.")
_PEM_INSTEAD = {
    "ssl.truststore": "give the CA certificates as a PEM file with ssl.ca.location",
    "ssl.keystore": "give the client certificate and key as PEM files with "
    "ssl.certificate.location and ssl.key.location",
}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    value: str
    origin: str  # where it was given, for messages: "-X", "client.properties line 3"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    security: ClientSecurity
    bootstrap: str | None  # bootstrap.servers from the settings, if they name it


def resolve_client_config(
    properties: Sequence[str], config_file: str | None, environ: Mapping[str, str]
) -> ClientConfig:
    """The settings of `-F FILE` (else of the file `WEIR_CLIENT_CONFIG` names), then
    of each `-X key=value`, as one ClientConfig; CliError with one line if wrong."""
    settings: list[Setting] = []
    if config_file:
        settings.extend(read_properties_file(config_file, config_file))
    elif environ.get(CLIENT_CONFIG_ENV):
        path = environ[CLIENT_CONFIG_ENV]
        settings.extend(read_properties_file(path, f"{path} ({CLIENT_CONFIG_ENV})"))
    settings.extend(settings_from_arguments(properties))
    return client_config(settings)


def settings_from_arguments(pairs: Iterable[str]) -> Iterator[Setting]:
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise CliError("-X: expected key=value, e.g. -X security.protocol=SASL_SSL")
        yield Setting(key.strip(), value, "-X")


def read_properties_file(path: str, name: str) -> list[Setting]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read client config {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"client config {name} is not UTF-8 text") from None
    return list(settings_from_properties(text, name))


def settings_from_properties(text: str, name: str) -> Iterator[Setting]:
    """`key=value` or `key: value` lines (key and value stripped); blank lines and
    lines starting with `#` or `!` are skipped."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cuts = [i for i in (line.find("="), line.find(":")) if i >= 0]
        cut = min(cuts, default=-1)
        if cut <= 0:
            raise CliError(f"{name} line {number}: expected key=value")
        key, value = line[:cut].strip(), line[cut + 1 :].strip()
        yield Setting(key, value, f"{name} line {number}")


def client_config(settings: Iterable[Setting]) -> ClientConfig:
    """Settings, in the order given (a later one wins), as a ClientConfig."""
    pairs: list[str] = []
    bootstrap: str | None = None
    protocol_given = False
    secured_setting: Setting | None = None
    for setting in settings:
        key = setting.key
        if key in BOOTSTRAP_KEYS:
            bootstrap = setting.value.strip() or None
            continue
        _check_known(setting)
        if key == JAAS_KEY:
            pairs.extend(_jaas_credentials(setting))
        else:
            pairs.append(f"{key}={setting.value}")
        protocol_given = protocol_given or key == PROTOCOL_KEY
        if key.startswith(SECURED_PREFIXES) and secured_setting is None:
            secured_setting = setting
    if secured_setting is not None and not protocol_given:
        raise CliError(
            f"{secured_setting.origin}: {secured_setting.key} is set but security.protocol "
            f"is not (the connection would be PLAINTEXT): add security.protocol=SASL_SSL, "
            f"SASL_PLAINTEXT or SSL"
        )
    return ClientConfig(parse_client_properties(pairs), bootstrap)


def _check_known(setting: Setting) -> None:
    key = setting.key
    if key in PROPERTY_NAMES or key == JAAS_KEY:
        return
    for prefix, instead in _PEM_INSTEAD.items():
        if key.startswith(prefix + "."):
            raise CliError(f"{setting.origin}: {key} is a Java keystore setting; {instead}")
    known = ", ".join(sorted(PROPERTY_NAMES | BOOTSTRAP_KEYS | {JAAS_KEY}))
    raise CliError(f"{setting.origin}: unknown setting {key} (known: {known})")


def _jaas_credentials(setting: Setting) -> list[str]:
    """`sasl.jaas.config=...LoginModule required username="u" password="p";` as the
    sasl.username and sasl.password it carries."""
    options = {
        name: re.sub(r"\\(.)", r"\1", value) for name, value in _JAAS_OPTION.findall(setting.value)
    }
    if "username" not in options or "password" not in options:
        raise CliError(
            f'{setting.origin}: sasl.jaas.config needs username="..." and password="..."'
        )
    return [f"sasl.username={options['username']}", f"sasl.password={options['password']}"]
