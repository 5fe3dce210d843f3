"""Kafka's `ssl.principal.mapping.rules`: a client certificate's subject, as a
distinguished name, to the principal's name (`SslPrincipalMapper`).

Rules are `DEFAULT` (the whole name) or `RULE:pattern/replacement/` with an optional
`L` or `U` after the last slash (lower- or upper-case the result); several are
separated by commas, with any whitespace (newlines too) around them, and the first
rule whose pattern matches the WHOLE name gives the name: the replacement is applied
as Java's `String.replaceAll` does (`$1` groups, `\\` escapes, a `$n` past the
pattern's groups is literal, as Kafka makes it). A backslash in a pattern or a
replacement escapes the next character (so `\\/` is a slash, `\\,` a comma). With no
matching rule the connection's authentication fails (`NoMatchingRuleError`).

Two differences from Kafka, both to make a mistake a startup error: text between
rules without a comma (Kafka silently drops the rule before it) and a `$n` when
the pattern has no groups (Kafka fails every handshake) are rejected by
`parse_mapping_rules`. Patterns are Python regular expressions: the common Java
syntax (groups, classes, `.*?`, anchors) is the same; Java-only syntax such as
`\\p{Lu}` or possessive quantifiers is refused at parse time.

The distinguished name is Java's `X500Principal.getName()` (RFC 2253) text, which
Kafka's rules are written against: `java_rfc2253_name` builds it from the
certificate's subject. It is `cryptography`'s `Name.rfc4514_string()` (the same
order, most specific first, `CN=alice,OU=eng,O=Acme,C=US`) except that (checked
against OpenJDK 17 and 25):

- attributes without an RFC 2253 keyword (only CN, C, L, ST, O, OU, STREET, DC and
  UID have one), such as EMAILADDRESS, are a dotted OID in both, but Java writes the
  value as `#` and the hex of its DER encoding:
  `1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d`, where
  `rfc4514_string` writes `1.2.840.113549.1.9.1=bob@example.com`;
- Java escapes `=` and `#` anywhere in a value and every leading and trailing
  space (`rfc4514_string`: `#` only first, one leading and one trailing space);
- (Java only) a BMPString value comes out as its raw bytes (`CN=\\00b\\00m\\00p`);
  `java_rfc2253_name` decodes it (`CN=bmp`). Certificates rarely use BMPString.

Checked against Kafka 4.3's SslPrincipalMapper on Kafka's documented rules and on
replacement edge cases; one difference: with two or more `$n` past the groups
Kafka's escaping shifts and the handshake fails, Weir keeps each `$n` literal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509

DEFAULT_RULES = "DEFAULT"


class MappingRuleError(ValueError):
    """`ssl.principal.mapping.rules` does not parse (a one-line message)."""


class NoMatchingRuleError(ValueError):
    """No rule maps this distinguished name: authentication fails."""


@dataclass(frozen=True)
class Rule:
    """`DEFAULT` when `pattern` is None, else `RULE:pattern/replacement/[LU]`."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when this rule does not match."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        mapped = self.pattern.sub(_java_replacement(self.replacement), distinguished_name)
        if self.case == "L":
            return mapped.lower()
        if self.case == "U":
            return mapped.upper()
        return mapped


def _read_until_slash(text: str, start: int) -> tuple[str, int]:
    """Characters up to the next unescaped `/` (kept as written, escapes included)
    and the position just past that slash."""
    position = start
    while position < len(text):
        char = text[position]
        if char == "\\":
            position += 2
            continue
        if char == "/":
            return text[start:position], position + 1
        position += 1
    raise MappingRuleError(f"rule {text[start:]!r} has no closing '/'")


def _parse_rule(text: str, start: int) -> tuple[Rule, int]:
    """One `RULE:...` from `start` (just past `RULE:`): the rule and where it ends."""
    pattern_text, position = _read_until_slash(text, start)
    replacement, position = _read_until_slash(text, position)
    case = ""
    if position < len(text) and text[position] in "LU":
        case = text[position]
        position += 1
    try:
        pattern = re.compile(pattern_text)
    except re.error as error:
        raise MappingRuleError(
            f"rule pattern {pattern_text!r} is not a regular expression: {error}"
        ) from None
    _check_replacement(replacement, pattern.groups)
    return Rule(pattern, replacement, case), position


def parse_mapping_rules(text: str) -> list[Rule]:
    """`ssl.principal.mapping.rules` to rules; empty entries are ignored."""
    rules: list[Rule] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return rules
        if text.startswith("DEFAULT", position):
            rules.append(Rule())
            position += len("DEFAULT")
        elif text.startswith("RULE:", position):
            rule, position = _parse_rule(text, position + len("RULE:"))
            rules.append(rule)
        elif text[position] != ",":
            found = text[position:].split(",", 1)[0].strip()
            raise MappingRuleError(
                f"invalid mapping rule {found!r}: not DEFAULT or RULE:pattern/replacement/[LU]"
            )
        while position < len(text) and text[position].isspace():
            position += 1
        if position < len(text):
            if text[position] != ",":
                rest = text[position:].split(",", 1)[0].strip()
                raise MappingRuleError(
                    f"unexpected {rest!r} after a mapping rule (rules are separated by commas)"
                )
            position += 1


def principal_name(rules: list[Rule], distinguished_name: str) -> str:
    """The first matching rule's name for `distinguished_name`."""
    for rule in rules:
        mapped = rule.apply(distinguished_name)
        if mapped is not None:
            return mapped
    raise NoMatchingRuleError(f"no principal mapping rule applies to {distinguished_name!r}")


# Java's Matcher.appendReplacement, with Kafka's `escapeLiteralBackReferences`: a
# group number is read digit by digit while it stays within the pattern's groups;
# a `$n` whose first digit is already past them is literal text.


def _replacement_parts(replacement: str, group_count: int) -> list[str | int]:
    """Literal text and group numbers; MappingRuleError for Java's invalid forms."""
    parts: list[str | int] = []
    literal: list[str] = []
    position = 0
    while position < len(replacement):
        char = replacement[position]
        if char == "\\":
            if position + 1 == len(replacement):
                raise MappingRuleError(f"replacement {replacement!r} ends with a lone '\\'")
            literal.append(replacement[position + 1])
            position += 2
            continue
        if char != "$":
            literal.append(char)
            position += 1
            continue
        digits = re.match(r"\d+", replacement[position + 1 :])
        if digits is None:
            raise MappingRuleError(
                f"replacement {replacement!r} has '$' without a group number (write '\\$')"
            )
        number_text = digits.group()
        if (
            group_count > 0
            and not number_text.startswith("0")
            and int(number_text[0]) > group_count
        ):
            literal.append("$" + number_text)
            position += 1 + len(number_text)
            continue
        group = int(number_text[0])
        if group > group_count:
            raise MappingRuleError(
                f"replacement {replacement!r} refers to group {group}, the pattern has none"
            )
        used = 1
        while used < len(number_text) and group * 10 + int(number_text[used]) <= group_count:
            group = group * 10 + int(number_text[used])
            used += 1
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(group)
        position += 1 + used
    if literal:
        parts.append("".join(literal))
    return parts


def _check_replacement(replacement: str, group_count: int) -> None:
    _replacement_parts(replacement, group_count)


def _java_replacement(replacement: str) -> Callable[[re.Match[str]], str]:
    def expand(match: re.Match[str]) -> str:
        parts = _replacement_parts(replacement, match.re.groups)
        return "".join(
            part if isinstance(part, str) else (match.group(part) or "") for part in parts
        )

    return expand


# Java's RFC 2253 rendering of an X.500 name (`X500Principal.getName()`).

_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string tags and their character encodings.
_STRING_TAGS = {
    0x0C: "utf-8",  # UTF8String
    0x12: "ascii",  # NumericString
    0x13: "ascii",  # PrintableString
    0x14: "latin-1",  # TeletexString
    0x16: "ascii",  # IA5String
    0x1A: "ascii",  # VisibleString
    0x1C: "utf-32-be",  # UniversalString
    0x1E: "utf-16-be",  # BMPString
}
_ESCAPED_ANYWHERE = frozenset(',=+<>#;"\\')


class _Der:
    """A minimal DER reader: tag, contents, whole element."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def at_end(self) -> bool:
        return self.position >= len(self.data)

    def element(self) -> tuple[int, bytes, bytes]:
        start = self.position
        tag = self.data[start]
        length = self.data[start + 1]
        offset = start + 2
        if length & 0x80:
            size = length & 0x7F
            length = int.from_bytes(self.data[offset : offset + size], "big")
            offset += size
        self.position = offset + length
        return tag, self.data[offset : offset + length], self.data[start : offset + length]


def _oid_text(contents: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in contents:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in (first, arcs[0] - 40 * first, *arcs[1:]))


def _escape_rfc2253(value: str) -> str:
    """Java's escaping: the special characters anywhere, every leading and trailing space."""
    stripped = value.strip(" ")
    if not stripped:
        return "\\ " * len(value)
    start = value.index(stripped)
    end = start + len(stripped)
    inner = "".join("\\" + char if char in _ESCAPED_ANYWHERE else char for char in stripped)
    return "\\ " * start + inner + "\\ " * (len(value) - end)


def _attribute_text(oid: str, value_tag: int, value_contents: bytes, value_der: bytes) -> str:
    keyword = _RFC2253_KEYWORDS.get(oid)
    encoding = _STRING_TAGS.get(value_tag)
    if keyword is None or encoding is None:
        return f"{keyword or oid}=#{value_der.hex()}"
    return f"{keyword}={_escape_rfc2253(value_contents.decode(encoding))}"


def java_rfc2253_name(name: x509.Name) -> str:
    """`X500Principal.getName()` for this name: RDNs most specific first."""
    rdns: list[str] = []
    sequence = _Der(_Der(name.public_bytes()).element()[1])
    while not sequence.at_end():
        attributes: list[str] = []
        rdn = _Der(sequence.element()[1])
        while not rdn.at_end():
            pair = _Der(rdn.element()[1])
            _, oid_contents, _ = pair.element()
            value_tag, value_contents, value_der = pair.element()
            attributes.append(
                _attribute_text(_oid_text(oid_contents), value_tag, value_contents, value_der)
            )
        rdns.append("+".join(attributes))
    return ",".join(reversed(rdns))
