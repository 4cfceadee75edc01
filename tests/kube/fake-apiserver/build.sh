#!/bin/sh
# Build the fake API server (standard library only; GOPATH mode, offline).
# usage: build.sh <output> <cache dir>
set -eu
out=$(realpath -m "$1")
cache=$(realpath -m "$2")
cd "$(dirname "$0")"
GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE="$cache" exec go build -o "$out" .
