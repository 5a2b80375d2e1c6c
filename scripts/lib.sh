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
