#!/bin/sh
# Installs the database servers of the fence module's tests
# (fence/internal/dbserver starts them on loopback, in temporary directories,
# as the tests need them): Debian's PostgreSQL server and client and
# MariaDB's server and client. Idempotent: does nothing when all are there.
# The tests look for them in the same places:
#   postgres, initdb:  on $PATH, else /usr/lib/postgresql/*/bin (the highest
#                      version)
#   psql:              on $PATH
#   mariadbd:          on $PATH, else /usr/sbin/mariadbd
#   mariadb-install-db, mariadb:  on $PATH
# and, for docs/fencing.md's Node example (fence/docs_test.go runs it),
# Node.js and npm (Debian's nodejs and npm when missing) and Node's pg,
# installed with npm into ${ZKLOCK_NODE_PREFIX:-$HOME/.cache/zklock/node}
# (the test sets NODE_PATH to its node_modules).
# The packages' maintainer scripts must not start the system's own servers:
# unless /usr/sbin/policy-rc.d exists already (then it is left as it is),
# one that forbids every start is in place for the install, and removed
# afterwards.
set -eu

say() { echo "install-databases: $*"; }
die() { echo "install-databases: $*" >&2; exit 1; }

POLICY=/usr/sbin/policy-rc.d

have_postgres() {
	command -v postgres >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && return 0
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/postgres" ] && [ -x "$d/initdb" ] && return 0
	done
	return 1
}
have_mariadbd() {
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || return 1
	command -v mariadb-install-db >/dev/null 2>&1
}
have_mariadb() { command -v mariadb >/dev/null 2>&1; }
have_psql() { command -v psql >/dev/null 2>&1; }
have_node() { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }

# Node's PostgreSQL client, pg, for the docs' Node example: not a Debian
# package; npm installs it (as the user running this script, without sudo)
# into NODE_PREFIX when it is missing there.
NODE_PREFIX=${ZKLOCK_NODE_PREFIX:-$HOME/.cache/zklock/node}
install_node_pg() {
	if [ -f "$NODE_PREFIX/node_modules/pg/package.json" ]; then
		say "Node's pg already in $NODE_PREFIX/node_modules; nothing to do"
		return 0
	fi
	have_node || die "node or npm missing: install Node.js and npm, then run this again"
	mkdir -p "$NODE_PREFIX"
	say "running: npm install --no-save --prefix $NODE_PREFIX pg@8"
	npm install --no-save --prefix "$NODE_PREFIX" pg@8 ||
		die "npm could not install pg into $NODE_PREFIX"
	[ -f "$NODE_PREFIX/node_modules/pg/package.json" ] || die "pg still missing from $NODE_PREFIX/node_modules after npm install"
	say "installed Node's pg in $NODE_PREFIX/node_modules"
}

pkgs=
have_postgres || pkgs="$pkgs postgresql"
have_psql || pkgs="$pkgs postgresql-client"
have_mariadbd || pkgs="$pkgs mariadb-server"
have_mariadb || pkgs="$pkgs mariadb-client"
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
if [ -z "$pkgs" ]; then
	say "PostgreSQL (postgres, initdb, psql), MariaDB (mariadbd, mariadb-install-db, mariadb) and Node.js (node, npm) already installed; nothing to do"
	install_node_pg
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "apt-get not available: install$pkgs yourself (PostgreSQL's postgres, initdb and psql; MariaDB's mariadbd, mariadb-install-db and mariadb)"
SUDO=
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run this script as root"
	SUDO=sudo
fi

# The servers the packages would start are not the tests' (the tests start
# their own): a policy-rc.d that exits 101 forbids every start.
if [ -e "$POLICY" ]; then
	say "$POLICY exists: leaving it as it is"
else
	say "creating $POLICY so that the packages start no service (removed afterwards)"
	trap '$SUDO rm -f "$POLICY"; say "removed $POLICY"' EXIT
	trap 'exit 1' HUP INT TERM
	$SUDO sh -c 'printf "#!/bin/sh\n# install-databases.sh: no service starts during the install\nexit 101\n" >"$1" && chmod 755 "$1"' sh "$POLICY"
fi

say "running: ${SUDO:+$SUDO }apt-get install -y --no-install-recommends$pkgs"
# shellcheck disable=SC2086 # $pkgs is a list of words
if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs; then
	say "install failed; running apt-get update and trying again"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
	# shellcheck disable=SC2086
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs
fi
have_postgres || die "postgres or initdb still missing after the install (dpkg -L postgresql-15 shows where they went)"
have_psql || die "psql still missing after the install"
have_mariadbd || die "mariadbd or mariadb-install-db still missing after the install"
have_mariadb || die "mariadb (the client) still missing after the install"
have_node || die "node or npm still missing after the install"
say "installed$pkgs"
install_node_pg
