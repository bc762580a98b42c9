#!/bin/sh
# Installs the peers of the interoperability tests (internal/interop): Apache
# Curator's recipes for Java with a JDK to compile the test's driver, and
# kazoo for Debian's python3, and jq, with which the docs' job-monitoring
# query runs in a test, and faketime (libfaketime), with which a test starts
# ZooKeeper servers whose clocks disagree, and nft (nftables), with which
# zktest.Loss drops loopback packets, and curl, which the docs' examples of
# zklock serve and its heartbeat test drive. Idempotent: does nothing when all
# are there. The tests look for them in the same places:
#   Curator:   /usr/share/java/curator-{recipes,framework,client}.jar (Debian)
#   javac:     $JAVA_HOME/bin/javac, else javac on $PATH
#   kazoo:     importable by /usr/bin/python3
#   faketime:  $ZKLOCK_LIBFAKETIME, else /usr/lib/*/faketime/libfaketime.so.1
#              (Debian's libfaketime, which the faketime package pulls in),
#              /usr/lib/faketime or /usr/local/lib/faketime (a source build)
#   nft:       on $PATH, else /usr/sbin/nft
#   curl:      on $PATH
set -eu

say() { echo "install-interop: $*"; }
die() { echo "install-interop: $*" >&2; exit 1; }

have_curator() { [ -f /usr/share/java/curator-recipes.jar ] && [ -f /usr/share/java/curator-framework.jar ]; }
have_javac() {
	if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then return 0; fi
	command -v javac >/dev/null 2>&1
}
have_kazoo() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import kazoo.recipe.lock' >/dev/null 2>&1; }
have_faketime() {
	if [ -n "${ZKLOCK_LIBFAKETIME:-}" ] && [ -f "$ZKLOCK_LIBFAKETIME" ]; then return 0; fi
	# The places internal/zkserver/faketime.go looks, in its order.
	for f in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 /usr/local/lib/faketime/libfaketime.so.1; do
		[ -f "$f" ] && return 0
	done
	return 1
}

# nft (nftables), with which zktest.Loss makes loopback links lossy.
have_nft() { command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ]; }

pkgs=
have_curator || pkgs="$pkgs libcurator-recipes-java"
have_javac || pkgs="$pkgs default-jdk-headless"
have_kazoo || pkgs="$pkgs python3-kazoo"
command -v jq >/dev/null 2>&1 || pkgs="$pkgs jq"
have_faketime || pkgs="$pkgs faketime"
have_nft || pkgs="$pkgs nftables"
command -v curl >/dev/null 2>&1 || pkgs="$pkgs curl"
if [ -z "$pkgs" ]; then
	say "Curator, javac, kazoo, jq, faketime, nft and curl already installed; nothing to do"
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "apt-get not available: install$pkgs yourself (Curator 5 jars in /usr/share/java, a JDK, kazoo for /usr/bin/python3, libfaketime, nftables, curl)"
SUDO=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run this script as root"
	SUDO=sudo
fi
say "running: ${SUDO:+$SUDO }apt-get install -y --no-install-recommends$pkgs"
if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs; then
	say "install failed; running apt-get update and trying again"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs
fi
have_curator || die "Curator jars still missing after the install"
have_javac || die "javac still missing after the install"
have_kazoo || die "kazoo still not importable by /usr/bin/python3 after the install"
have_faketime || die "libfaketime.so.1 still missing after the install (dpkg -L libfaketime shows where it went)"
have_nft || die "nft still missing after the install"
say "installed$pkgs"
