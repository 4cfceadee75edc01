package main

// Streaming lists (KEP-3157): a watch with sendInitialEvents=true starts with the matching
// objects as ADDED events, then a BOOKMARK annotated k8s.io/initial-events-end at the
// resourceVersion they were read at. Served as kube-apiserver serves it by default for
// the version this server claims (`version <gitVersion>`): WatchList is beta and on in
// 1.32 and from 1.34, off in 1.27-1.31 and 1.33, unknown before, where a watch with
// resourceVersionMatch is refused. `watchlist off` refuses it whatever the version;
// `watchlist ignore` takes the parameters and serves a plain watch (no end bookmark), as a
// server or proxy that does not know them might.

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

var watchListOff, watchListIgnore bool

func watchListServed(gitVersion string) bool {
	if watchListOff {
		return false
	}
	parts := strings.SplitN(strings.TrimPrefix(gitVersion, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major > 1 || minor == 32 || minor >= 34
}

// Whether r asks for a streaming list; when it does and the server (as configured) cannot
// serve one, the refusal is written (422, the messages of kube-apiserver's ListOptions
// validation) and ok is false. Called with s.mu held.
func watchListAsked(w http.ResponseWriter, r *http.Request) (asked bool, ok bool) {
	q := r.URL.Query()
	send, match := q.Get("sendInitialEvents"), q.Get("resourceVersionMatch")
	if (send == "" && match == "") || watchListIgnore {
		return false, true
	}
	var msg string
	switch {
	case !watchListServed(rs.version) && send != "" && minorOf(rs.version) >= 27:
		msg = "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
	case !watchListServed(rs.version):
		msg = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"
	case send != "true":
		return false, true
	case match != "NotOlderThan":
		msg = "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
	}
	if msg != "" {
		status(w, 422, "Invalid", fmt.Sprintf("ListOptions.meta.k8s.io \"\" is invalid: %s", msg))
		return true, false
	}
	return true, true
}

func minorOf(gitVersion string) int {
	parts := strings.SplitN(strings.TrimPrefix(gitVersion, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// The end of the initial events: a bookmark at rv.
func initialEventsEnd(kind, apiVersion string, rv int) map[string]interface{} {
	return map[string]interface{}{"kind": kind, "apiVersion": apiVersion,
		"metadata": map[string]interface{}{"resourceVersion": strconv.Itoa(rv),
			"annotations": map[string]interface{}{"k8s.io/initial-events-end": "true"}}}
}

func watchListCommand(s *server, f []string) bool {
	if len(f) != 2 || f[0] != "watchlist" {
		return false
	}
	s.mu.Lock()
	watchListOff, watchListIgnore = f[1] == "off", f[1] == "ignore"
	s.mu.Unlock()
	return true
}

// A watch event as kube-apiserver writes it (metav1.WatchEvent: "type" before "object"; a
// map would put "object" first).
type watchEvent struct {
	Type   string      `json:"type"`
	Object interface{} `json:"object"`
}
