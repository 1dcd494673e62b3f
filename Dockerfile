# One image per service: a static (musl) binary FROM scratch, nothing else:
# no shell, no libc, no package manager; numeric non-root user; the root
# filesystem can be mounted read-only (nothing in it is written).
#
# Built in two steps, so no base image is ever pulled (see docs/deploy.md):
#   scripts/images                       # both steps for every image
# or by hand:
#   cargo build --release --locked --target x86_64-unknown-linux-musl -p portcullis-injector
#   mkdir -p dist/empty && cp "$CARGO_TARGET_DIR"/x86_64-unknown-linux-musl/release/portcullis-injector dist/
#   DOCKER_BUILDKIT=0 docker build --build-arg SERVICE=injector -t ghcr.io/portcullis/injector:dev .
#
# SERVICE is injector, validator or cert-manager. .dockerignore keeps the
# context to dist/.
FROM scratch
ARG SERVICE
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=
LABEL org.opencontainers.image.title="portcullis-${SERVICE}" \
      org.opencontainers.image.description="Portcullis ${SERVICE}: Kubernetes dynamic admission control" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY dist/portcullis-${SERVICE} /portcullis
# Empty directories owned by the runtime user, so that a volume mounted
# there starts writable (docker-compose.yml: the cert-manager's CA in `ca`,
# the published trust bundle in `trust`). In Kubernetes nothing is written.
COPY --chown=65532:65532 dist/empty/ /trust/
COPY --chown=65532:65532 dist/empty/ /var/lib/portcullis/ca/
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/portcullis"]
CMD ["serve"]
