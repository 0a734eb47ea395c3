# syntax=docker/dockerfile:1
# The rollup binary in a small image: docker build -t rollup:dev .  (docker-compose.yml builds it).
# The entrypoint is rollup itself, so a container's command is a subcommand and its flags:
#   docker run --rm -p 8080:8080 rollup:dev serve --demo

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY embedded/go.mod embedded/go.sum ./embedded/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/rollup ./cmd/rollup

# debian-slim rather than distroless: the compose one-shots need /bin/sh (a token is printed
# once and kept in a file), and ca-certificates lets rollup reach TLS deployments (Atlas).
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/rollup rollup \
 && mkdir -p /var/lib/rollup/data /var/lib/rollup/tokens \
 && chown -R rollup:rollup /var/lib/rollup
COPY --from=build /out/rollup /usr/local/bin/rollup
USER rollup
WORKDIR /var/lib/rollup
# Listen on every interface of the container; the embedded store (no ROLLUP_MONGODB_URI) keeps
# its data in the volume-friendly /var/lib/rollup/data.
ENV ROLLUP_LISTEN=:8080 \
    ROLLUP_DATA=/var/lib/rollup/data
EXPOSE 8080
ENTRYPOINT ["rollup"]
CMD ["serve"]
