"""`ssl.principal.mapping.rules` map a certificate subject as Kafka's
SslPrincipalMapper does, over Java's RFC 2253 rendering of the subject."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from weir.security.principal_mapping import (
    DEFAULT_RULES,
    MappingRuleError,
    NoMatchingRuleError,
    java_rfc2253_name,
    parse_mapping_rules,
    principal_name,
)

# Kafka's documented example (docs/security.html, "Customizing SSL User Name").
KAFKA_EXAMPLE = """
    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
    RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
    RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,
    DEFAULT
"""


def mapped(rules: str, distinguished_name: str) -> str:
    return principal_name(parse_mapping_rules(rules), distinguished_name)


def test_the_default_rule_keeps_the_whole_distinguished_name() -> None:
    assert mapped(DEFAULT_RULES, "CN=alice,O=Acme") == "CN=alice,O=Acme"


def test_kafkas_documented_multi_line_rules_map_as_kafka_does() -> None:
    # Outputs checked against Kafka 4.3's SslPrincipalMapper.
    assert mapped(KAFKA_EXAMPLE, "CN=Kafka1,OU=ServiceUsers,O=Apache,C=US") == "Kafka1"
    duke = "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US"
    assert mapped(KAFKA_EXAMPLE, duke) == "duke@javasoft"
    assert (
        mapped(KAFKA_EXAMPLE, "OU=JavaSoft,O=Sun Microsystems,C=US")
        == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


def test_the_first_matching_rule_wins() -> None:
    rules = "RULE:^CN=(.*),O=.*$/first-$1/, RULE:^CN=(.*)$/second-$1/"
    assert mapped(rules, "CN=a,O=b") == "first-a"
    assert mapped(rules, "CN=a") == "second-a"


def test_a_rule_must_match_the_whole_name() -> None:
    with pytest.raises(NoMatchingRuleError):
        mapped("RULE:CN=a/x/", "CN=a,O=b")


def test_without_a_matching_rule_mapping_fails() -> None:
    with pytest.raises(NoMatchingRuleError):
        mapped("RULE:^CN=a$/x/", "CN=b")
    with pytest.raises(NoMatchingRuleError):
        mapped("", "CN=b")


def test_l_and_u_change_the_case_of_the_result() -> None:
    assert mapped("RULE:^CN=(.*)$/$1/L", "CN=AbC") == "abc"
    assert mapped("RULE:^CN=(.*)$/$1/U", "CN=AbC") == "ABC"


def test_the_replacement_applies_as_javas_replace_all() -> None:
    # A pattern that also matches the empty end of the name replaces twice.
    assert mapped("RULE:.*/x/", "CN=abc") == "xx"


def test_backslash_escapes_a_slash_in_the_pattern_and_a_dollar_in_the_replacement() -> None:
    assert mapped(r"RULE:^CN=([^,]*)\/x.*$/$1/U", "CN=a/x,O=b") == "A"
    assert mapped(r"RULE:^CN=(.*)$/\$1-$1/", "CN=a") == "$1-a"


def test_group_numbers_are_read_while_they_name_a_group_and_higher_ones_are_literal() -> None:
    twelve_groups = "RULE:^(C)(N)(=)(.)(.)(.)(.)(.)(.)(.)(.)(.*)$/$12-$1$13-$9/"
    assert mapped(twelve_groups, "CN=abcdefghijkl") == "ijkl-CC3-f"
    assert mapped("RULE:^CN=(.*)$/$1$2/", "CN=abc") == "abc$2"


def test_an_unmatched_optional_group_is_empty() -> None:
    assert mapped("RULE:^CN=(a)?b.*$/[$1]/", "CN=bz") == "[]"


def test_whitespace_around_rules_and_empty_entries_are_ignored() -> None:
    assert len(parse_mapping_rules("  DEFAULT ,\n\t RULE:a/b/ , ,")) == 2


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULTX",
        "RULE:a/b",
        "RULE:a/b/X",
        "RULE:(/b/",
        "RULE:^CN=a$/$1/",
        "RULE:(a)/$x/",
        "RULE:(a)/b\\/",
        "RULE:a/b/\nDEFAULT",
        "FOO",
    ],
)
def test_a_bad_rule_is_a_one_line_config_error(rules: str) -> None:
    with pytest.raises(MappingRuleError) as raised:
        parse_mapping_rules(rules)
    assert "\n" not in str(raised.value)


def name(*attributes: x509.NameAttribute) -> x509.Name:
    return x509.Name(list(attributes))


A = x509.NameAttribute


# Expected strings are OpenJDK's X500Principal.getName() for the same DER.
def test_the_java_name_lists_the_most_specific_attribute_first_like_rfc4514_string() -> None:
    subject = name(
        A(NameOID.COUNTRY_NAME, "US"),
        A(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        A(NameOID.COMMON_NAME, "alice"),
    )
    assert java_rfc2253_name(subject) == "CN=alice,O=Acme\\, Inc.,C=US"
    assert java_rfc2253_name(subject) == subject.rfc4514_string()


def test_the_java_name_writes_attributes_without_a_keyword_as_oid_and_der_hex() -> None:
    subject = name(A(NameOID.COMMON_NAME, "bob"), A(NameOID.EMAIL_ADDRESS, "bob@example.com"))
    assert (
        java_rfc2253_name(subject)
        == "1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d,CN=bob"
    )
    serial = name(
        A(NameOID.SERIAL_NUMBER, "123"),
        A(NameOID.USER_ID, "u1"),
        A(NameOID.DOMAIN_COMPONENT, "com"),
    )
    assert java_rfc2253_name(serial) == "DC=com,UID=u1,2.5.4.5=#1303313233"


def test_the_java_name_escapes_equals_hash_and_every_edge_space() -> None:
    assert java_rfc2253_name(name(A(NameOID.COMMON_NAME, "#a=b#"))) == "CN=\\#a\\=b\\#"
    assert java_rfc2253_name(name(A(NameOID.COMMON_NAME, "  a  "))) == "CN=\\ \\ a\\ \\ "
    assert (
        java_rfc2253_name(name(A(NameOID.COMMON_NAME, '"q"+;<>\\'))) == 'CN=\\"q\\"\\+\\;\\<\\>\\\\'
    )
    assert java_rfc2253_name(name(A(NameOID.COMMON_NAME, "café"))) == "CN=café"


def test_the_java_name_joins_a_multi_valued_rdn_with_plus() -> None:
    subject = x509.Name(
        [
            x509.RelativeDistinguishedName([A(NameOID.DOMAIN_COMPONENT, "com")]),
            x509.RelativeDistinguishedName(
                [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "y"), A(NameOID.COMMON_NAME, "x")]
            ),
        ]
    )
    assert java_rfc2253_name(subject) == "CN=x+OU=y,DC=com"


def test_a_certificate_subject_maps_through_the_rules() -> None:
    subject = name(
        A(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"), A(NameOID.COMMON_NAME, "Kafka1")
    )
    assert mapped(KAFKA_EXAMPLE, java_rfc2253_name(subject)) == "Kafka1"
