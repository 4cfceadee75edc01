#!/bin/sh
# Build helm-render with Debian's Go, standard library only (GOPATH mode, offline).
# usage: build.sh <output> <cache dir>
set -eu
out=$(realpath -m "$1")
cache=$(realpath -m "$2")
cd "$(dirname "$0")"
GO111MODULE=off GOFLAGS= GOCACHE="$cache" exec go build -o "$out" .
