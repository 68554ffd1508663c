#!/usr/bin/env bash
# Installs the build and test dependencies on Debian 12 (bookworm).
#
# One list for every entry point (scripts/test.sh, scripts/run.sh, .ci/run).
# Packages already installed are not touched: when all are present, apt is
# not run at all, so the scripts work offline and without root. When some are
# missing, they are installed non-interactively as root (or through
# passwordless sudo); otherwise the script names them and fails.
#
#   bash scripts/setup.sh          install what is missing
#   bash scripts/setup.sh --list   print the package list and exit
set -euo pipefail

packages=(
	build-essential cmake pkg-config g++ binutils
	clang libclang-rt-14-dev
	libgtest-dev libgmock-dev libbenchmark-dev
	libtbb-dev libboost-dev libasio-dev liburcu-dev libuv1-dev libglib2.0-dev
	systemtap-sdt-dev nlohmann-json3-dev libcli11-dev libfmt-dev
	gnuplot-nox jq gdb scdoc dpkg-dev lintian
	libcpp-httplib-dev python3-prometheus-client curl universal-ctags abigail-tools
)

# --arm64: what the aarch64 cross build and its emulated tests need
# (scripts/arm64.sh): the cross compiler, user-mode qemu, and GoogleTest for
# arm64 through multiarch.
arm64=0
if [[ ${1:-} == --arm64 ]]; then
	arm64=1
	packages=(g++-aarch64-linux-gnu qemu-user-static libgtest-dev:arm64 cmake pkg-config)
fi

if [[ ${1:-} == --list ]]; then
	printf '%s\n' "${packages[@]}"
	exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "setup: no dpkg; install the equivalents of: ${packages[*]}" >&2
	exit 0
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "setup: all ${#packages[@]} packages present"
	exit 0
fi

echo "setup: installing ${missing[*]}"
if ((EUID == 0)); then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "setup: missing packages and no root; run as root:" >&2
	echo "  apt-get install ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ((arm64)) && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	"${sudo[@]}" dpkg --add-architecture arm64
	"${sudo[@]}" apt-get update -q
fi
install() { "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; }
# Refresh the package lists only when there are none or they are stale.
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || ! install; then
	"${sudo[@]}" apt-get update -q
	install
fi
