#!/usr/bin/env bash
# Assemble a single-node Apache Kafka (KRaft) runtime from Maven Central jars.
#
# There is no Kafka tarball download on these machines, only Maven Central, so the
# broker is rebuilt from its published jars: a throwaway pom depends on kafka_2.13
# (the server) plus a log4j2 binding, and `mvn dependency:copy-dependencies` copies
# the whole runtime closure into one libs/ folder. Run it with
#   java -cp 'LIBS/*' kafka.Kafka server.properties
#
# Usage: scripts/assemble-kafka.sh        prints the libs folder on stdout
# Env:   SESSION_STREAM_KAFKA_VERSION  (default 4.4.0)
#        SESSION_STREAM_CACHE          (default $HOME/.cache/session-stream)
# Idempotent: a finished libs/ folder carries a .complete marker and is reused;
# concurrent runs for one version serialise on a lock file.
set -euo pipefail

KAFKA_VERSION="${SESSION_STREAM_KAFKA_VERSION:-4.4.0}"
# Kafka 4.x logs through slf4j into log4j2, but its pom leaves the binding to the
# distribution: without one the broker runs with slf4j's no-op logger. slf4j-api is
# pinned to 2.x because the 2.x binding ignores a 1.7 api, and 1.7 callers (Kafka's
# own pom picks 1.7.36) work unchanged against the 2.x api.
LOG4J_VERSION=2.24.3
SLF4J_VERSION=2.0.17
CACHE_ROOT="${SESSION_STREAM_CACHE:-$HOME/.cache/session-stream}"
TARGET="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIBS="$TARGET/libs"

mkdir -p "$TARGET"
exec 9>"$TARGET/.lock"
flock 9
if [[ -f "$LIBS/.complete" ]]; then
    echo "$LIBS"
    exit 0
fi
WORK="$(mktemp -d "$TARGET/.assemble.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.session-stream</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF

echo "assembling Apache Kafka $KAFKA_VERSION into $LIBS" >&2
mvn -q -B -f "$WORK/pom.xml" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$WORK/libs" >&2

# Fails fast if the classpath cannot even load the Scala server tools.
java -cp "$WORK/libs/*" kafka.tools.StorageTool random-uuid >/dev/null

touch "$WORK/libs/.complete"
rm -rf "$LIBS"
mv "$WORK/libs" "$LIBS"
echo "$LIBS"
