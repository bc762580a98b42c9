#!/bin/sh
# Installs ZooKeeper and a Java runtime for the zktest harness (go test needs a
# real server). Idempotent: does nothing when the harness can already find
# both, the same way it looks for them:
#   ZooKeeper: $ZOOKEEPER_HOME/*.jar or $ZOOKEEPER_HOME/lib/*.jar, else
#              /usr/share/java/zookeeper.jar (Debian/Ubuntu package)
#   Java:      $JAVA_HOME/bin/java, else java on $PATH
# Otherwise installs Debian's zookeeper package (which pulls in a JRE) with
# apt-get, through sudo unless run as root.
set -eu

DEBIAN_JAR=/usr/share/java/zookeeper.jar
say() { echo "install-zookeeper: $*"; }
die() { echo "install-zookeeper: $*" >&2; exit 1; }

java_bin() {
	if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
		echo "$JAVA_HOME/bin/java"
	else
		command -v java 2>/dev/null || true
	fi
}

java_ok() {
	j=$(java_bin)
	[ -n "$j" ] && "$j" -version >/dev/null 2>&1
}

# zk_where prints where ZooKeeper is, or nothing.
zk_where() {
	if [ -n "${ZOOKEEPER_HOME:-}" ]; then
		for f in "$ZOOKEEPER_HOME"/*.jar "$ZOOKEEPER_HOME"/lib/*.jar; do
			if [ -f "$f" ]; then
				echo "ZOOKEEPER_HOME=$ZOOKEEPER_HOME"
				return
			fi
		done
		die "ZOOKEEPER_HOME=$ZOOKEEPER_HOME contains no *.jar or lib/*.jar; fix or unset it"
	fi
	if [ -f "$DEBIAN_JAR" ]; then
		echo "$DEBIAN_JAR"
	fi
}

where=$(zk_where)
if [ -n "$where" ] && java_ok; then
	say "ZooKeeper already installed ($where, java: $(java_bin)); nothing to do"
	exit 0
fi

if [ -n "$where" ]; then
	say "found ZooKeeper ($where) but no working java"
else
	say "no ZooKeeper found"
fi

command -v apt-get >/dev/null 2>&1 ||
	die "apt-get not available: install ZooKeeper 3.8 yourself and set ZOOKEEPER_HOME (and JAVA_HOME if java is not on PATH), or point ZKLOCK_TEST_SERVERS at running servers"

SUDO=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run this script as root"
	SUDO=sudo
fi

say "running: ${SUDO:+$SUDO }apt-get update"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
say "running: ${SUDO:+$SUDO }apt-get install -y --no-install-recommends zookeeper"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper

where=$(zk_where)
[ -n "$where" ] || die "apt-get install zookeeper finished but $DEBIAN_JAR is missing"
java_ok || die "ZooKeeper installed ($where) but java still does not run; install a JRE (e.g. apt-get install default-jre-headless)"
say "installed ZooKeeper ($where, java: $(java_bin))"
