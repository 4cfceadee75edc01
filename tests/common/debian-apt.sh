# shellcheck shell=sh
# Sourced: a private apt configuration for a test, so that nothing under /etc/apt is
# written. Used by debian-download.sh (packages downloaded, nothing installed) and by
# tests/e2e/kube-build.sh (Debian's kubernetes source package).
#
# debian_archive_uri: the Debian archive the machine already uses (deb822 or one-line form),
#   else deb.debian.org.
# debian_apt_config DIR TYPES SUITE...: DIR/sources.list with one line per type ("deb",
#   "deb-src") and suite (main, Debian's keyring), DIR/apt.conf with apt's lists and cache
#   under DIR, the machine's dpkg status; exports APT_CONFIG. `apt-get update` is the
#   caller's.

debian_archive_uri() {
    _uri=$(sed -n 's/^URIs:[[:space:]]*\(http[^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
           /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
    [ -n "$_uri" ] || _uri=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\) .*/\2/p' \
           /etc/apt/sources.list 2>/dev/null | head -n1)
    echo "${_uri:-http://deb.debian.org/debian}"
}

debian_apt_config() {
    _dir=$1 _types=$2
    shift 2
    _uri=$(debian_archive_uri)
    _key=/usr/share/keyrings/debian-archive-keyring.gpg
    mkdir -p "$_dir/lists/partial" "$_dir/cache/archives/partial"
    : >"$_dir/sources.list.new"
    for _suite in "$@"; do
        for _type in $_types; do
            printf '%s [signed-by=%s] %s %s main\n' "$_type" "$_key" "$_uri" "$_suite" \
                >>"$_dir/sources.list.new"
        done
    done
    mv "$_dir/sources.list.new" "$_dir/sources.list"
    cat >"$_dir/apt.conf" <<CONF
Dir::Etc::sourcelist "$_dir/sources.list";
Dir::Etc::sourceparts "-";
Dir::Etc::preferences "$_dir/preferences";
Dir::Etc::preferencesparts "-";
Dir::State::Lists "$_dir/lists";
Dir::Cache "$_dir/cache";
Dir::State::status "/var/lib/dpkg/status";
APT::Get::List-Cleanup "false";
APT::Sandbox::User "$(id -un)";
CONF
    APT_CONFIG="$_dir/apt.conf"
    export APT_CONFIG
}
