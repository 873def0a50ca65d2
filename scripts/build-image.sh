#!/usr/bin/env bash
# Build the fedctl image from the Containerfile on a machine with no Docker engine and no
# registry but Debian's and PyPI (docs/install.md, "The image"). `make image` runs this.
#
# The Containerfile's two bases are registry images (debian-slim, distroless python3). Here
# both are made from Debian's packages with mmdebstrap and stored in a private buildah
# storage under build/image/, then `buildah bud` builds the Containerfile itself with them
# (--build-arg BUILDER_IMAGE/RUNTIME_IMAGE), so there is one image definition:
#   builder base  Debian bookworm, variant apt, plus python3-venv: debian-slim's part that the
#                 builder stage uses (its apt-get is then a no-op)
#   runtime base  distroless-like: only the extracted files of python3.11 and the libraries
#                 it and our wheels need, CA certificates, netbase, a passwd with the
#                 non-root user 65532; no shell, no dpkg or apt, no compiler
# The bases are kept (named by a hash of their recipe) and reused; IMAGE_REBUILD_BASES=1
# makes them again from today's packages. Output: build/image/fedctl-<version>.oci.tar (an OCI
# image archive: `podman load -i`, `skopeo copy oci-archive:... docker-daemon:...`).
#
# Needs root (mmdebstrap's and buildah's chroots), mmdebstrap and buildah (scripts/system-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "build-image: needs root (mmdebstrap and buildah chroots); elsewhere use" \
        "'docker build -f Containerfile .' or 'podman build -f Containerfile .'" >&2
    exit 1
fi
for tool in mmdebstrap buildah; do
    command -v "$tool" >/dev/null || { echo "build-image: $tool not found (scripts/system-deps.sh installs it)" >&2; exit 1; }
done

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n1)
out=build/image
suite=bookworm
archive="$out/fedctl-$version.oci.tar"
buildah=(buildah --root "$PWD/$out/storage" --runroot "$PWD/$out/run"
         --storage-driver "${IMAGE_STORAGE_DRIVER:-overlay}")
mkdir -p "$out"

# python3.11 and what it and the locked wheels load (libstdc++6: grpcio), CA certificates
# (a kubeconfig without a CA trusts the system's) and netbase (/etc/services, /etc/protocols).
# install-info is listed so that apt satisfies readline-common's "dpkg | install-info" with
# it, not with dpkg; its programs are then removed with the others.
runtime_packages=python3.11-minimal,libpython3.11-stdlib,libstdc++6,libssl3,ca-certificates,netbase,install-info

log() { echo "build-image: $*" >&2; }

# A failed step leaves buildah's working containers mounted: remove them (every container
# of this private storage is ours), and the half-made root filesystems.
runtime_job=
cleanup() {
    if [ -n "$runtime_job" ]; then kill "$runtime_job" 2>/dev/null || true; wait 2>/dev/null || true; fi
    "${buildah[@]}" rm --all >/dev/null 2>&1 || true
    rm -rf "$out"/rootfs-builder "$out"/rootfs-runtime "$out"/rootfs-*.tar
}
trap cleanup EXIT

# The source label names a public https address only, without credentials: not a local
# path (a CI clone's origin), and never a token a remote URL may carry (https://u:token@host).
public_source_url() {
    case "$1" in
        https://*) printf '%s\n' "$1" | sed -E 's#^https://[^/@]*@#https://#' ;;
        *) echo ;;
    esac
}

# Run a chatty command with its output in a log, shown only if it fails.
quietly() {
    local log=$1; shift
    "$@" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
}

have_image() { "${buildah[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# Commit the directory tree $2 as a one-layer image named $1.
commit_tree() {
    local name=$1 tree=$2 container
    container=$("${buildah[@]}" from scratch)
    # A tar, not the directory: `buildah add` keeps an archive's owners (copy makes them root).
    tar -C "$tree" --numeric-owner -cf "$tree.tar" .
    "${buildah[@]}" add -q "$container" "$tree.tar" / >/dev/null
    rm -f "$tree.tar"
    "${buildah[@]}" config --created-by "scripts/build-image.sh $recipe" "$container"
    "${buildah[@]}" commit -q --rm "$container" "$name" >/dev/null
}

make_builder_base() {
    local tree="$out/rootfs-builder"
    rm -rf "$tree"
    quietly "$out/mmdebstrap-builder.log" mmdebstrap --quiet --variant=apt \
        --include=ca-certificates,python3,python3-venv \
        --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata "$suite" "$tree"
    rm -rf "$tree"/dev/*
    commit_tree "$builder_base" "$tree"
    rm -rf "$tree"
}

make_runtime_base() {
    local tree="$out/rootfs-runtime" debs pkg deb dir
    rm -rf "$tree"
    quietly "$out/mmdebstrap-runtime.log" mmdebstrap --quiet --variant=extract \
        --include="$runtime_packages" --skip=cleanup/apt/cache "$suite" "$tree"
    debs="$tree/var/cache/apt/archives"
    # One program: python3.11. The others came with the packages' dependencies for their
    # maintainer scripts, which never run here (install-info, debconf, the openssl CLI).
    for dir in usr/bin usr/sbin bin sbin; do
        [ ! -d "$tree/$dir" ] || find "$tree/$dir" -maxdepth 1 \( -type f -o -type l \) \
            ! -name python3.11 -delete
    done
    # What vulnerability scanners read (distroless's convention): one control file a package.
    mkdir -p "$tree/var/lib/dpkg/status.d"
    for deb in "$debs"/*.deb; do
        pkg=$(dpkg-deb -f "$deb" Package)
        dpkg-deb -f "$deb" > "$tree/var/lib/dpkg/status.d/$pkg"
    done
    # Not the package machinery: the image has no dpkg and no apt.
    rm -rf "$tree"/var/cache/apt "$tree"/var/lib/apt "$tree"/etc/apt "$tree"/dev/* \
        "$tree"/var/lib/dpkg/{info,available,status,status-old,arch,diversions,cmethopt}
    # What maintainer scripts would have done: the python3 name, the CA bundle, the linker
    # cache, the standard library's bytecode (read-only at run time, so made now).
    ln -sf python3.11 "$tree/usr/bin/python3"
    mkdir -p "$tree/etc/ssl/certs"
    cat "$tree"/usr/share/ca-certificates/mozilla/*.crt > "$tree/etc/ssl/certs/ca-certificates.crt"
    ldconfig -r "$tree"
    chroot "$tree" /usr/bin/python3.11 -m compileall -q /usr/lib/python3.11
    # The user (distroless's numbers): root, and nonroot 65532 with a home it owns.
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
        > "$tree/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' > "$tree/etc/group"
    install -d -m 0700 -o 65532 -g 65532 "$tree/home/nonroot"
    install -d -m 1777 "$tree/tmp"
    commit_tree "$runtime_base" "$tree"
    rm -rf "$tree"
}

# The bases are named by their recipe (the functions above and the package lists).
recipe=$( { declare -f commit_tree make_builder_base make_runtime_base
            echo "$suite $runtime_packages"; } | sha256sum | cut -c1-12)
builder_base="localhost/fedctl-builder-base:$recipe"
runtime_base="localhost/fedctl-runtime-base:$recipe"

started=$(date +%s)
if [ -n "${IMAGE_REBUILD_BASES:-}" ] || ! have_image "$runtime_base"; then
    log "runtime base from Debian $suite (mmdebstrap, extracted packages only)"
    (trap - EXIT; make_runtime_base) &  # mostly downloads: beside the builder base's dpkg runs
    runtime_job=$!
fi
if [ -n "${IMAGE_REBUILD_BASES:-}" ] || ! have_image "$builder_base"; then
    log "builder base from Debian $suite (mmdebstrap)"
    make_builder_base
fi
if [ -n "$runtime_job" ]; then wait "$runtime_job"; runtime_job=; fi
# Bases of an older recipe are not used again.
"${buildah[@]}" images --format '{{.Name}}:{{.Tag}}' \
    | grep -E '^localhost/fedctl-(builder|runtime)-base:' | grep -v ":$recipe\$" \
    | xargs -r "${buildah[@]}" rmi >/dev/null || true
log "bases ready in $(( $(date +%s) - started ))s; building the Containerfile"

revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
source_url=$(public_source_url "$(git config --get remote.origin.url 2>/dev/null || true)")
# The builder's RUN steps trust what this machine trusts (a TLS-intercepting proxy's CA in
# the host's store, say): the host's bundle is mounted for those steps only, never copied.
trust=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    trust=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
fi
"${buildah[@]}" bud --quiet --layers --isolation chroot --pull=never --format oci \
    --build-arg BUILDER_IMAGE="$builder_base" --build-arg RUNTIME_IMAGE="$runtime_base" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" \
    --build-arg SOURCE_URL="$source_url" "${trust[@]}" \
    -f Containerfile -t "localhost/fedctl:$version" . >/dev/null
rm -f "$archive"
"${buildah[@]}" push -q "localhost/fedctl:$version" "oci-archive:$archive:fedctl:$version"
log "$archive ($(du -h "$archive" | cut -f1)) in $(( $(date +%s) - started ))s"
