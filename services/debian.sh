# Debian packages taken apart without installing them, for the installers that need a few of their
# files (services/risk/install.sh, tests/testdata.sh). Source it, then set:
#   DEB_TMP       a scratch folder (the caller removes it)
#   DEB_VERSIONS  the file of pinned versions ("<package> <version>" lines, # comments)
#   DEB_WHO       the name that prefixes messages
# Each .deb is fetched with `apt-get download` (`apt-get update` first only when that fails) and
# its SHA256 checked against the one `apt-cache show <pkg>=<version>` reports before it is
# unpacked with `dpkg-deb -x`.
for tool in apt-get apt-cache dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null || { echo "${DEB_WHO:-debian.sh}: $tool is required (Debian/Ubuntu)" >&2; exit 3; }
done
DEB_SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
deb_updated=0

deb_update() {
  if [ "$deb_updated" = 0 ]; then
    echo "$DEB_WHO: $1 not in the package lists; running apt-get update" >&2
    $DEB_SUDO apt-get update -qq >&2
    deb_updated=1
  fi
}

# deb_version_of PKG: its pinned version in $DEB_VERSIONS
deb_version_of() { awk -v p="$1" '$1 == p { print $2 }' "$DEB_VERSIONS"; }

# deb_resolve PKG PINNED: the pinned version when the package lists have it (after one apt-get
# update if needed), else Debian's current candidate (a stable update superseded the pin), with a
# warning
deb_resolve() {
  local pkg=$1 ver=$2 cand
  apt-cache show "$pkg=$ver" >/dev/null 2>&1 || deb_update "$pkg=$ver"
  if apt-cache show "$pkg=$ver" >/dev/null 2>&1; then
    echo "$ver"
    return
  fi
  cand=$(apt-cache policy "$pkg" | awk '/Candidate:/ { print $2 }')
  if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
    echo "$DEB_WHO: no version of $pkg is available" >&2
    return 1
  fi
  echo "$DEB_WHO: WARNING: $pkg=$ver is gone from Debian; taking its current version $cand" \
       "(pin it in $DEB_VERSIONS)" >&2
  echo "$cand"
}

# deb_fetch PKG VERSION: the verified .deb's path on stdout
deb_fetch() {
  local pkg=$1 ver=$2 deb want got
  mkdir -p "$DEB_TMP/dl"
  if ! (cd "$DEB_TMP/dl" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$DEB_TMP/apt.err"); then
    deb_update "$pkg=$ver"
    (cd "$DEB_TMP/dl" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$DEB_TMP/apt.err") || {
      cat "$DEB_TMP/apt.err" >&2
      echo "$DEB_WHO: cannot download $pkg=$ver (superseded? pin the current version in $DEB_VERSIONS)" >&2
      return 1
    }
  fi
  deb=$(ls "$DEB_TMP/dl/${pkg}_"*.deb | head -1)
  want=$(apt-cache show "$pkg=$ver" | awk '/^SHA256:/ { print $2; exit }')
  got=$(sha256sum "$deb" | cut -d' ' -f1)
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    echo "$DEB_WHO: SHA256 mismatch for $deb: apt says '${want}', file is $got" >&2
    return 1
  fi
  echo "$deb"
}

# deb_unpack PKG: its pinned (or current) version, verified, extracted into $DEB_TMP/x/PKG; the
# version taken is in $DEB_TMP/x/PKG.version
deb_unpack() {
  local pkg=$1 ver deb
  ver=$(deb_version_of "$pkg")
  [ -n "$ver" ] || { echo "$DEB_WHO: no version of $pkg in $DEB_VERSIONS" >&2; return 2; }
  ver=$(deb_resolve "$pkg" "$ver")
  deb=$(deb_fetch "$pkg" "$ver")
  rm -rf "$DEB_TMP/x/$pkg"; mkdir -p "$DEB_TMP/x/$pkg"
  dpkg-deb -x "$deb" "$DEB_TMP/x/$pkg"
  rm -f "$deb"
  echo "$ver" > "$DEB_TMP/x/$pkg.version"
}
