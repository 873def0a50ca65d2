#!/usr/bin/env bash
# README's run command (`make run`): a local fleet with the control plane, the examples
# applied to the hub, and the result across the members.
set -euo pipefail
cd "$(dirname "$0")/.."
FEDCTL=.venv/bin/fedctl
KUBECONFIG_FILE=kubeconfigs/local.yaml
kubectl_hub() { kubectl --kubeconfig "$KUBECONFIG_FILE" --context hub "$@"; }

$FEDCTL local up --control-plane --export-kubeconfig
echo "applying examples/propagation to the hub"
kubectl_hub apply -f examples/propagation/00-namespace.yaml
kubectl_hub apply -f examples/propagation/10-web.yaml -f examples/propagation/20-policies.yaml

echo "waiting for the members to hold the copies and report ready"
for _ in $(seq 1 120); do
  ready=$(kubectl_hub get deployment web -n shop -o jsonpath='{.status.readyReplicas}' 2>/dev/null || true)
  [ "${ready:-0}" = "12" ] && break
  sleep 0.5
done

for kind in deployments services configmaps; do
  echo; echo "== fedctl get $kind -n shop"
  $FEDCTL get "$kind" -n shop --kubeconfig "$KUBECONFIG_FILE" --hub-context hub
done
echo; echo "== on the hub"
kubectl_hub get deployment,resourcebindings -n shop
echo
echo "member2 runs the overridden image:"
kubectl --kubeconfig "$KUBECONFIG_FILE" --context member2 get deployment web -n shop \
  -o jsonpath='{.spec.template.spec.containers[0].image}{"\n"}'
echo
echo "The control plane keeps running (log: .fleet/control-plane.log); \`make down\` stops everything."
cat <<'NEXT'

Try next (`local up` put the fleet's contexts into your kubeconfig with hub current, unless
it warned above: then add --kubeconfig kubeconfigs/local.yaml; `make down` takes them out):
  .venv/bin/fedctl dashboard                           # the fleet in a browser: open the
                                                       #   link it prints (127.0.0.1, as you)
  .venv/bin/fedctl get clusters                        # the members, ready and labelled
  .venv/bin/fedctl get deploy -n shop -w               # every copy; -w follows changes
  .venv/bin/fedctl plan --live --fail member1          # what-if: member1 fails
  kubectl scale deployment web -n shop --replicas 6    # the copies follow
  source <(.venv/bin/fedctl completion bash)           # tab completion
NEXT
