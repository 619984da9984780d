# dropstream: one static binary on a distroless non-root base.
# Build: docker build -t dropstream:local .   (compose.yaml does it)
# The Go version follows go.mod.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/dropstream ./cmd/dropstream

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dropstream /usr/local/bin/dropstream
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/dropstream"]
CMD ["run"]
