#!/bin/sh
# Installs what building and testing pytrace-sample needs on Debian 12, then the npm
# packages of the viewer test. Safe to run again; installs only what is missing.
set -eu

packages="build-essential pkg-config zlib1g-dev libcmocka-dev libdw-dev libelf-dev \
libbpf-dev bpftool clang llvm clang-format cppcheck python3 protobuf-compiler patchelf \
golang-go groff-base"
command -v node >/dev/null 2>&1 || packages="$packages nodejs"
command -v npm >/dev/null 2>&1 || packages="$packages npm"

missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done

if [ -n "$missing" ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "installing:$missing"
	$sudo apt-get update -q
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing
fi

top=$(cd "$(dirname "$0")/.." && pwd)
(cd "$top/tests/viewer" && npm ci --no-audit --no-fund)

# The real CPython 3.14 and 3.15 the tests run against (Debian sid's, into .sid/).
"$top/tools/fetch-pythons.sh"
