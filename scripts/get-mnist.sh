#!/usr/bin/env bash
# Downloads the four files of MNIST (or Fashion-MNIST) into DIR/mnist (or
# DIR/fashion-mnist) and checks each against its published sha256; a file
# that does not match is deleted.
# Files already there with the right checksum are kept.
#
#   scripts/get-mnist.sh DIR [mnist|fashion-mnist]
#
# Then pass --data DIR to the examples, or set NABLA_DATA=DIR. The mirrors
# are those torchvision uses; set NABLA_MNIST_MIRROR to use another (a URL
# that the four file names are appended to). Needs curl or wget.
set -euo pipefail

usage() {
    echo "usage: $0 DIR [mnist|fashion-mnist]" >&2
    exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
dir=$1
dataset=${2:-mnist}

files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
case $dataset in
mnist)
    mirror=https://ossci-datasets.s3.amazonaws.com/mnist
    sums=(440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609
          3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c
          8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6
          f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6)
    ;;
fashion-mnist)
    mirror=http://fashion-mnist.s3-website.eu-central-1.amazonaws.com
    sums=(3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84
          a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845
          346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073
          67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5)
    ;;
*)
    echo "get-mnist: unknown data set '$dataset' (mnist or fashion-mnist)" >&2
    usage
    ;;
esac
mirror=${NABLA_MNIST_MIRROR:-$mirror}

if command -v curl >/dev/null 2>&1; then
    fetch() { curl -fsSL --retry 2 --connect-timeout 20 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
    fetch() { wget -q --tries=2 --timeout=20 -O "$2" "$1"; }
else
    echo "get-mnist: needs curl or wget to download; neither is installed" >&2
    exit 1
fi
if command -v sha256sum >/dev/null 2>&1; then
    sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
    sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
    echo "get-mnist: needs sha256sum or shasum to check the files; neither is installed" >&2
    exit 1
fi

out=$dir/$dataset
mkdir -p "$out"
part=""
trap 'if [ -n "$part" ]; then rm -f "$part"; fi' EXIT

for i in "${!files[@]}"; do
    name=${files[$i]}
    want=${sums[$i]}
    dest=$out/$name
    if [ -f "$dest" ]; then
        if [ "$(sha256 "$dest")" = "$want" ]; then
            echo "get-mnist: $dest is there already (checksum ok)"
            continue
        fi
        echo "get-mnist: $dest has the wrong checksum: deleting it and downloading again" >&2
        rm -f "$dest"
    fi
    url=$mirror/$name
    part=$dest.part
    echo "get-mnist: downloading $url"
    if ! fetch "$url" "$part"; then
        echo "get-mnist: could not download $url (no network, or the mirror is down); nothing kept for $name" >&2
        exit 1
    fi
    got=$(sha256 "$part")
    if [ "$got" != "$want" ]; then
        rm -f "$part"
        echo "get-mnist: $url has sha256 $got, expected $want: deleted it" >&2
        exit 1
    fi
    mv "$part" "$dest"
    part=""
done
echo "get-mnist: the $dataset files are in $out (checksums ok); pass --data $dir or set NABLA_DATA=$dir"
