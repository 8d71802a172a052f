#!/bin/sh
# Fetches Debian sid's real CPython 3.14 and 3.15 for the tests, into .sid/ (ignored by git).
#
# A private apt state (its own sources, lists, cache and an empty dpkg status) so that the
# system's apt is never touched; the packages and everything they depend on are unpacked
# with dpkg-deb into .sid/root (with their headers), a root that runs under chroot as it is (the container
# tests). Beside each interpreter, bin/python3.X-host is a copy patched to sid's own loader
# and libraries (patchelf), so that it also runs directly on this machine.
#
# Cached: does nothing when .sid/root is complete. Without the network it says so and
# exits 0, unless CI is set: CI must test the real interpreters.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
sid="$top/.sid"
root="$sid/root"
versions="3.14 3.15"
stamp="$sid/done"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$versions" ]; then
	exit 0
fi

fail()
{
	echo "fetch-pythons: $*" >&2
	if [ -n "${CI:-}" ]; then
		exit 1
	fi
	echo "fetch-pythons: the tests of the real CPython 3.14 and 3.15 will be skipped" >&2
	exit 0
}

command -v patchelf >/dev/null 2>&1 || fail "patchelf is missing (make deps installs it)"

rm -rf "$sid"
mkdir -p "$sid/apt/lists/partial" "$sid/apt/cache/archives/partial" "$root"
: >"$sid/apt/status"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
	>"$sid/apt/sources.list"
set -- -o Dir::Etc::SourceList="$sid/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
	-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
	-o Dir::State::Lists="$sid/apt/lists" -o Dir::Cache="$sid/apt/cache" \
	-o Dir::State::status="$sid/apt/status" -o Debug::NoLocking=1 \
	-o APT::Install-Recommends=0 -o APT::Sandbox::User=root -q

echo "fetch-pythons: Debian sid's python$(echo "$versions" | sed 's/ / and python/g') into .sid/"
apt-get "$@" update >"$sid/apt.log" 2>&1 || fail "apt-get update of sid failed (see .sid/apt.log)"
pkgs=""
for v in $versions; do
	pkgs="$pkgs python$v libpython$v-dev"
done
# shellcheck disable=SC2086
apt-get "$@" install -y --download-only $pkgs >>"$sid/apt.log" 2>&1 ||
	fail "downloading$pkgs from sid failed (see .sid/apt.log)"

for deb in "$sid"/apt/cache/archives/*.deb; do
	dpkg-deb -x "$deb" "$root"
done
# The headers are for tests/e2e/test_cpython_offsets.py; the static libraries not needed.
find "$root/usr/lib" -name 'libpython3*.a' -delete
# A merged-/usr root: debootstrap's base-files would make these links.
for d in bin lib lib64 sbin; do
	[ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"
done
mkdir -p "$root/tmp" "$root/proc" "$root/dev"
chmod 1777 "$root/tmp"

for v in $versions; do
	host="$root/usr/bin/python$v-host"
	cp "$root/usr/bin/python$v" "$host"
	patchelf --set-interpreter "$root/lib64/ld-linux-x86-64.so.2" \
		--force-rpath --set-rpath "$root/usr/lib/x86_64-linux-gnu" "$host"
	"$host" -c 'import multiprocessing, sys; assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' "$v" ||
		fail "the patched python$v does not run"
done
rm -rf "$sid/apt/cache/archives"
echo "$versions" >"$stamp"
