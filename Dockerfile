# One image per service: docker build --build-arg SERVICE=injector -t portcullis-injector .
#   SERVICE is injector, validator or cert-manager.
# Dependencies are compiled in their own cached layer (cargo-chef); the
# runtime image is distroless, non-root, with nothing but the binary.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS chef
RUN cargo install cargo-chef --locked --version 0.1.78
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS builder
ARG SERVICE
COPY --from=planner /src/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json -p portcullis-${SERVICE}
COPY . .
RUN cargo build --release --locked -p portcullis-${SERVICE} \
 && cp target/release/portcullis-${SERVICE} /portcullis \
 && mkdir /certs

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /portcullis /portcullis
# Owned by the runtime user, so that volumes mounted here start writable
# (docker-compose.yml: the self-signed CA, the cert-manager's CA).
COPY --from=builder --chown=65532:65532 /certs /certs
COPY --from=builder --chown=65532:65532 /certs /trust
COPY --from=builder --chown=65532:65532 /certs /var/lib/portcullis/ca
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/portcullis"]
CMD ["serve"]
