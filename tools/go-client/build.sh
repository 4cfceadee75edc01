#!/bin/sh
# Build go-client against Debian's Go packages (GOPATH mode, offline). CGO_ENABLED=0:
# a static binary, so scripts/gpu-smoke.sh can run it on a host with no libc of ours.
# usage: build.sh <output> <cache dir>
set -eu
out=$(realpath -m "$1")
cache=$(realpath -m "$2")
cd "$(dirname "$0")"
CGO_ENABLED=0 GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE="$cache" exec go build -o "$out" .
