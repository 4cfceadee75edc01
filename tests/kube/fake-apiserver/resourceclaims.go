// ResourceClaims (resource.k8s.io/v1, namespaced) for the DRA prepare tests: GET of one
// claim by namespace and name, 404 with a Status otherwise. The claims are what the
// tests load on stdin (the real 1.34 objects of tests/data/dra/objects, or edits of them):
//
//	rc-load PATH     store the claim in the JSON file PATH (under its namespace and name)
//	rc-json JSON     store the claim given inline (one line, compact JSON)
//	rc-delete NS NAME
//	rc-fail NS NAME CODE   answer that claim's GETs with HTTP CODE and a Status (0: stop)
//	rc-429 NS NAME N SECS  answer that claim's next N GETs with 429 Too Many Requests and
//	                       Retry-After: SECS (as the API server's max-in-flight filter does)
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
)

const rcPrefix = "/apis/resource.k8s.io/v1/namespaces/"

// Guarded by the server's mu.
var rc = struct {
	objs map[string]map[string]interface{} // "ns/name" -> claim
	fail map[string]int
	tooMany map[string][2]int // "ns/name" -> {GETs left to answer 429, Retry-After}
}{objs: map[string]map[string]interface{}{}, fail: map[string]int{}, tooMany: map[string][2]int{}}

func init() {
	routes = append(routes, rcRoute)
	commands = append(commands, rcCommand)
}

func rcStore(s *server, text []byte) {
	var o map[string]interface{}
	if err := json.Unmarshal(text, &o); err != nil {
		s.say("rc-error %v", err)
		return
	}
	md, _ := o["metadata"].(map[string]interface{})
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	s.mu.Lock()
	rc.objs[ns+"/"+name] = o
	s.mu.Unlock()
}

func rcCommand(s *server, f []string) bool {
	switch f[0] {
	case "rc-load":
		b, err := os.ReadFile(f[1])
		if err != nil {
			s.say("rc-error %v", err)
			return true
		}
		rcStore(s, b)
	case "rc-json":
		rcStore(s, []byte(strings.Join(f[1:], " ")))
	case "rc-delete":
		s.mu.Lock()
		delete(rc.objs, f[1]+"/"+f[2])
		s.mu.Unlock()
	case "rc-fail":
		code, _ := strconv.Atoi(f[3])
		s.mu.Lock()
		rc.fail[f[1]+"/"+f[2]] = code
		s.mu.Unlock()
	case "rc-429":
		n, _ := strconv.Atoi(f[3])
		secs, _ := strconv.Atoi(f[4])
		s.mu.Lock()
		rc.tooMany[f[1]+"/"+f[2]] = [2]int{n, secs}
		s.mu.Unlock()
	default:
		return false
	}
	return true
}

func rcRoute(s *server, w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, rcPrefix) {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, rcPrefix), "/")
	if len(parts) != 3 || parts[1] != "resourceclaims" {
		return false
	}
	if r.Method != "GET" {
		status(w, 405, "MethodNotAllowed", "only GET is served here")
		return true
	}
	key := parts[0] + "/" + parts[2]
	s.mu.Lock()
	o, found := rc.objs[key]
	code := rc.fail[key]
	tm := rc.tooMany[key]
	if tm[0] > 0 {
		rc.tooMany[key] = [2]int{tm[0] - 1, tm[1]}
	}
	var body []byte
	if found {
		body, _ = json.Marshal(o)
	}
	s.mu.Unlock()
	if tm[0] > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(tm[1]))
		status(w, 429, "TooManyRequests", "Too many requests, please try again later.")
		return true
	}
	if code != 0 {
		status(w, code, "InternalError", fmt.Sprintf(`resourceclaims "%s" failed on command`, parts[2]))
		return true
	}
	if !found {
		status(w, 404, "NotFound", fmt.Sprintf(`resourceclaims.resource.k8s.io "%s" not found`, parts[2]))
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
	return true
}
