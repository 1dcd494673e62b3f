# Jaeger all-in-one (v2 code line, in-memory storage) from the static binary
# scripts/build-control-plane.sh builds, for machines that cannot pull
# jaegertracing/jaeger. docker-compose.yml and the local node use it through
# PORTCULLIS_JAEGER_IMAGE; elsewhere use the public image.
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="jaeger" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/jaegertracing/jaeger"
COPY dist/jaeger /jaeger
# The built-in all-in-one configuration listens on localhost unless told.
ENV JAEGER_LISTEN_HOST=0.0.0.0
USER 10001:10001
EXPOSE 4317 4318 16686
ENTRYPOINT ["/jaeger"]
