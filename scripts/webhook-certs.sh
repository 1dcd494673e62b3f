#!/usr/bin/env bash
# Interim certificates for an in-cluster install, until the cert-manager
# (CSR-based issuance and rotation) is part of deploy/: makes a CA and a
# serving certificate per webhook Service with openssl, stores each as the
# TLS Secret the Deployment mounts, and sets caBundle on every webhook
# configuration labelled portcullis.dev/inject-ca=true. Keys are written to
# a temporary directory that is removed on exit.
#
#   scripts/webhook-certs.sh [NAMESPACE]     (default portcullis-system; uses KUBECONFIG)
#
# Certificates are valid for 90 days; run it again to renew (the webhooks
# pick the new Secret up without a restart).
set -euo pipefail
ns=${1:-portcullis-system}
kubectl=${KUBECTL:-kubectl}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 90 \
  -subj "/CN=portcullis-webhook-ca" -keyout ca.key -out ca.crt 2>/dev/null
for svc in portcullis-injector portcullis-validator; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$svc.$ns.svc" \
    -keyout "$svc.key" -out "$svc.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc\nextendedKeyUsage=serverAuth\n' \
    "$svc" "$svc" "$ns" "$svc" "$ns" >"$svc.ext"
  openssl x509 -req -in "$svc.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 90 \
    -extfile "$svc.ext" -out "$svc.crt" 2>/dev/null
  "$kubectl" -n "$ns" create secret tls "$svc-tls" --cert "$svc.crt" --key "$svc.key" \
    --dry-run=client -o yaml | "$kubectl" apply -f -
done
bundle=$(base64 -w0 <ca.crt)
for kind in mutatingwebhookconfigurations validatingwebhookconfigurations; do
  for name in $("$kubectl" get "$kind" -l portcullis.dev/inject-ca=true -o name); do
    count=$("$kubectl" get "$name" -o jsonpath='{range .webhooks[*]}x{end}' | wc -c)
    patch=$(for i in $(seq 0 $((count - 1))); do printf '{"op":"add","path":"/webhooks/%d/clientConfig/caBundle","value":"%s"},' "$i" "$bundle"; done)
    "$kubectl" patch "$name" --type=json -p "[${patch%,}]"
  done
done
echo "certificates installed in $ns; caBundle set on the labelled webhook configurations" >&2
