# The pod sandbox ("pause") image of a local node, also the do-nothing demo
# sidecar of the dev overlay: deploy/images/pause.c, static, FROM scratch.
# Built by scripts/images (no registry can be reached to pull one).
FROM scratch
ARG VERSION=dev
ARG SOURCE=
LABEL org.opencontainers.image.title="portcullis-pause" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}"
COPY dist/pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
