#!/bin/sh
# Rewrite tests/wire/data/share_groups_kafka_4_4.txt (and share_state_kafka_4_4.txt): kafka-clients 4.4.0's serialization
# of the samples in ShareWireCheck.java. Run from anywhere; needs a JDK 17+ and Maven, and
# kafka-clients 4.4.0 in .cache/maven (scripts/test puts it there).
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
build="$root/.cache/wire-check"
mvn -B -q -o -Dstyle.color=never -Dmaven.repo.local="$root/.cache/maven" \
    -f "$root/compat_tests/java/wire-check/pom.xml" compile </dev/null
mkdir -p "$root/tests/wire/data"
java -cp "$build/classes:$(cat "$build/classpath.txt")" dev.weir.wirecheck.ShareWireCheck \
    >"$root/tests/wire/data/share_groups_kafka_4_4.txt"
echo "wrote tests/wire/data/share_groups_kafka_4_4.txt"
java -cp "$build/classes:$(cat "$build/classpath.txt")" dev.weir.wirecheck.ShareStateWireCheck \
    >"$root/tests/wire/data/share_state_kafka_4_4.txt"
echo "wrote tests/wire/data/share_state_kafka_4_4.txt"
