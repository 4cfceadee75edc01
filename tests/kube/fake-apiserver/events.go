// Events in namespace "default" (core/v1): created by POST, bumped by a merge PATCH, kept
// in a store the test lists; and, on command, failed the ways an outage or an RBAC gap
// fails them.
//
// commands:
//   events               one "event NAME TYPE REASON COUNT MESSAGE" line per stored Event
//                        (sorted by name), then "ok events"
//   events-fail MODE     every Event request from now on: 503 (an API server warming up
//                        or overloaded), 403 (RBAC gap: a Status as kube-apiserver's),
//                        drop (every connection closed, the request unanswered), or off
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
)

const eventsPath = "/api/v1/namespaces/default/events"

var events = struct {
	mu    sync.Mutex
	store map[string]map[string]interface{}
	fail  string
}{store: map[string]map[string]interface{}{}}

func init() {
	routes = append(routes, eventsRoute)
	commands = append(commands, eventsCommand)
}

func eventsRoute(s *server, w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if p != eventsPath && !strings.HasPrefix(p, eventsPath+"/") {
		return false
	}
	events.mu.Lock()
	fail := events.fail
	events.mu.Unlock()
	switch fail {
	case "503":
		status(w, 503, "ServiceUnavailable", "the server is currently unable to handle the request")
		return true
	case "403":
		status(w, 403, "Forbidden", fmt.Sprintf(`events is forbidden: User "system:serviceaccount:gpu:gdp" cannot %s resource "events" in API group "" in the namespace "default"`, strings.ToLower(r.Method)))
		return true
	case "drop":
		s.dropConns()
		// Unanswered: the handler ends with the connection already gone.
		panic(http.ErrAbortHandler)
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var body map[string]interface{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			status(w, 400, "BadRequest", err.Error())
			return true
		}
	}
	name := strings.TrimPrefix(strings.TrimPrefix(p, eventsPath), "/")
	events.mu.Lock()
	defer events.mu.Unlock()
	switch {
	case r.Method == "POST" && name == "":
		md, _ := body["metadata"].(map[string]interface{})
		n, _ := md["name"].(string)
		if n == "" {
			status(w, 422, "Invalid", "metadata.name: Required value")
			return true
		}
		if _, found := events.store[n]; found {
			status(w, 409, "AlreadyExists", fmt.Sprintf(`events "%s" already exists`, n))
			return true
		}
		events.store[n] = body
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(body)
	case r.Method == "PATCH" && name != "":
		ev, found := events.store[name]
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf(`events "%s" not found`, name))
			return true
		}
		for k, v := range body { // a merge patch of top-level fields is all a bump needs
			ev[k] = v
		}
		json.NewEncoder(w).Encode(ev)
	case r.Method == "GET" && name != "":
		ev, found := events.store[name]
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf(`events "%s" not found`, name))
			return true
		}
		json.NewEncoder(w).Encode(ev)
	default:
		status(w, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
	}
	return true
}

func eventsCommand(s *server, f []string) bool {
	switch f[0] {
	case "events":
		events.mu.Lock()
		names := make([]string, 0, len(events.store))
		for n := range events.store {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ev := events.store[n]
			count, _ := ev["count"].(float64)
			msg, _ := ev["message"].(string)
			s.say("event %s %v %v %d %s", n, ev["type"], ev["reason"], int(count),
				strings.ReplaceAll(msg, "\n", " "))
		}
		events.mu.Unlock()
	case "events-fail":
		if len(f) > 1 {
			events.mu.Lock()
			events.fail = f[1]
			events.mu.Unlock()
		}
	default:
		return false
	}
	return true
}
