// NFD's NodeFeature objects (nfd.k8s-sigs.io/v1alpha1, namespaced) for the label
// delivery tests: create, get, update at a resourceVersion (409 when stale), delete,
// list and watch by field selector, with resourceVersions from the server's one counter.
// What a peer or an operator does to them comes on stdin:
//
//	nf-delete NS NAME          delete it (a DELETED event), as `kubectl delete nodefeature`
//	nf-label NS NAME KEY=VALUE set (KEY- removes) one of its spec.labels (a MODIFIED event)
//	nf-flap NS NAME MS COUNT   COUNT such changes MS apart (a peer fighting over it); "ok"
//	                           after the last
//	nf-crd off|on              the CRD deleted (objects deleted, watches ended, every
//	                           request 404 as for an API that is not served) or installed
//	                           again (empty)
//	nf-dump NS NAME            says "nf NS/NAME JSON" (or "nf NS/NAME absent")
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const nfPrefix = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/"

type nfEvent struct {
	rv  int
	typ string
	obj map[string]interface{}
	// The object as encoded when the event happened (ResourceSlices: encoded once, not
	// per watcher, and the stored map is not deep-copied); nil: obj is encoded.
	raw json.RawMessage
}

func (e nfEvent) object() interface{} {
	if e.raw != nil {
		return e.raw
	}
	return e.obj
}

type nfWatcher struct {
	ch   chan nfEvent
	stop chan struct{}
}

// Guarded by the server's mu.
var nf = struct {
	objs     map[string]map[string]interface{} // "ns/name" -> object
	history  []nfEvent
	watchers map[*nfWatcher]bool
	off      bool
}{objs: map[string]map[string]interface{}{}, watchers: map[*nfWatcher]bool{}}

func init() {
	routes = append(routes, nfRoute)
	commands = append(commands, nfCommand)
}

func nfMeta(o map[string]interface{}) map[string]interface{} {
	m, _ := o["metadata"].(map[string]interface{})
	if m == nil {
		m = map[string]interface{}{}
		o["metadata"] = m
	}
	return m
}

// A deep copy through JSON, so that what a watcher encodes is never changed under it.
func nfCopy(o map[string]interface{}) map[string]interface{} {
	b, _ := json.Marshal(o)
	var c map[string]interface{}
	json.Unmarshal(b, &c)
	return c
}

func (s *server) nfRecord(typ string, o map[string]interface{}) {
	e := nfEvent{rv: s.rv, typ: typ, obj: nfCopy(o)}
	nf.history = append(nf.history, e)
	for w := range nf.watchers {
		select {
		case w.ch <- e:
		default:
		}
	}
}

// Store o as ns/name at a new resourceVersion; typ is the event it makes.
func (s *server) nfPut(key string, o map[string]interface{}, typ string) {
	s.rv++
	md := nfMeta(o)
	md["resourceVersion"] = strconv.Itoa(s.rv)
	if _, ok := md["uid"]; !ok {
		md["uid"] = fmt.Sprintf("nf-uid-%d", s.rv)
	}
	o["kind"] = "NodeFeature"
	o["apiVersion"] = "nfd.k8s-sigs.io/v1alpha1"
	nf.objs[key] = o
	s.nfRecord(typ, o)
}

func (s *server) nfDelete(key string) bool {
	o, ok := nf.objs[key]
	if !ok {
		return false
	}
	delete(nf.objs, key)
	s.rv++
	nfMeta(o)["resourceVersion"] = strconv.Itoa(s.rv)
	s.nfRecord("DELETED", o)
	return true
}

func nfJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func nfRoute(s *server, w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if !strings.HasPrefix(p, nfPrefix) {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(p, nfPrefix), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[1] != "nodefeatures" {
		return false
	}
	ns := parts[0]
	s.mu.Lock()
	off := nf.off
	s.mu.Unlock()
	if off {
		status(w, 404, "NotFound", "the server could not find the requested resource")
		return true
	}
	if len(parts) == 2 {
		switch r.Method {
		case "GET":
			if r.URL.Query().Get("watch") != "" {
				s.nfWatch(w, r, ns)
			} else {
				s.nfList(w, r, ns)
			}
		case "POST":
			s.nfCreate(w, r, ns)
		default:
			status(w, 405, "MethodNotAllowed", "method not allowed")
		}
		return true
	}
	key := ns + "/" + parts[2]
	s.mu.Lock()
	defer s.mu.Unlock()
	o, found := nf.objs[key]
	switch r.Method {
	case "GET":
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf(`nodefeatures.nfd.k8s-sigs.io "%s" not found`, parts[2]))
			return true
		}
		nfJSON(w, 200, o)
	case "PUT":
		var in map[string]interface{}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
			status(w, 400, "BadRequest", err.Error())
			return true
		}
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf(`nodefeatures.nfd.k8s-sigs.io "%s" not found`, parts[2]))
			return true
		}
		want, _ := nfMeta(in)["resourceVersion"].(string)
		if want != nfMeta(o)["resourceVersion"] {
			status(w, 409, "Conflict", fmt.Sprintf(`Operation cannot be fulfilled on nodefeatures.nfd.k8s-sigs.io "%s": the object has been modified; please apply your changes to the latest version and try again`, parts[2]))
			return true
		}
		nfMeta(in)["uid"] = nfMeta(o)["uid"]
		s.nfPut(key, in, "MODIFIED")
		nfJSON(w, 200, in)
	case "DELETE":
		if !s.nfDelete(key) {
			status(w, 404, "NotFound", fmt.Sprintf(`nodefeatures.nfd.k8s-sigs.io "%s" not found`, parts[2]))
			return true
		}
		nfJSON(w, 200, map[string]interface{}{"kind": "Status", "apiVersion": "v1", "status": "Success"})
	default:
		status(w, 405, "MethodNotAllowed", "method not allowed")
	}
	return true
}

func (s *server) nfCreate(w http.ResponseWriter, r *http.Request, ns string) {
	var in map[string]interface{}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		status(w, 400, "BadRequest", err.Error())
		return
	}
	name, _ := nfMeta(in)["name"].(string)
	key := ns + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, found := nf.objs[key]; found || name == "" {
		status(w, 409, "AlreadyExists", fmt.Sprintf(`nodefeatures.nfd.k8s-sigs.io "%s" already exists`, name))
		return
	}
	nfMeta(in)["namespace"] = ns
	s.nfPut(key, in, "ADDED")
	nfJSON(w, 201, in)
}

func nfMatches(ns, sel string, o map[string]interface{}) bool {
	md := nfMeta(o)
	if md["namespace"] != ns {
		return false
	}
	return sel == "" || sel == "metadata.name="+fmt.Sprint(md["name"])
}

func (s *server) nfList(w http.ResponseWriter, r *http.Request, ns string) {
	sel := r.URL.Query().Get("fieldSelector")
	s.mu.Lock()
	items := []interface{}{}
	for _, o := range nf.objs {
		if nfMatches(ns, sel, o) {
			items = append(items, o)
		}
	}
	l := map[string]interface{}{"kind": "NodeFeatureList", "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
		"items": items, "metadata": map[string]interface{}{"resourceVersion": strconv.Itoa(s.rv)}}
	b, _ := json.Marshal(l)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *server) nfWatch(w http.ResponseWriter, r *http.Request, ns string) {
	q := r.URL.Query()
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	sel := q.Get("fieldSelector")
	timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
	wt := &nfWatcher{ch: make(chan nfEvent, 1000), stop: make(chan struct{})}
	s.mu.Lock()
	for _, e := range nf.history {
		if e.rv > from {
			wt.ch <- e
		}
	}
	nf.watchers[wt] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(nf.watchers, wt)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	var end <-chan time.Time
	if timeout > 0 {
		end = time.After(time.Duration(timeout) * time.Second)
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case e := <-wt.ch:
			if !nfMatches(ns, sel, e.obj) {
				continue
			}
			enc.Encode(watchEvent{e.typ, e.obj})
			w.(http.Flusher).Flush()
		case <-wt.stop:
			// Whatever was queued before the stop still goes out (the DELETED events
			// of a CRD being removed), then the stream ends.
			for {
				select {
				case e := <-wt.ch:
					if nfMatches(ns, sel, e.obj) {
						enc.Encode(watchEvent{e.typ, e.obj})
					}
				default:
					w.(http.Flusher).Flush()
					return
				}
			}
		case <-end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func nfCommand(s *server, f []string) bool {
	if len(f) < 2 || !strings.HasPrefix(f[0], "nf-") {
		return false
	}
	switch f[0] {
	case "nf-delete":
		if len(f) > 2 {
			s.mu.Lock()
			s.nfDelete(f[1] + "/" + f[2])
			s.mu.Unlock()
		}
	case "nf-label":
		if len(f) > 3 {
			s.nfLabel(f[1]+"/"+f[2], f[3])
		}
	case "nf-flap":
		if len(f) > 4 {
			ms, _ := strconv.Atoi(f[3])
			count, _ := strconv.Atoi(f[4])
			for i := 0; i < count; i++ {
				s.nfLabel(f[1]+"/"+f[2], fmt.Sprintf("example.com/flap=%d", i))
				time.Sleep(time.Duration(ms) * time.Millisecond)
			}
		}
	case "nf-crd":
		s.mu.Lock()
		if f[1] == "off" && !nf.off {
			for key := range nf.objs {
				s.nfDelete(key)
			}
			for w := range nf.watchers {
				close(w.stop)
				delete(nf.watchers, w)
			}
			nf.history = nil
			nf.off = true
		} else if f[1] == "on" {
			nf.off = false
		}
		s.mu.Unlock()
	case "nf-dump":
		if len(f) > 2 {
			s.mu.Lock()
			o, found := nf.objs[f[1]+"/"+f[2]]
			var b []byte
			if found {
				b, _ = json.Marshal(o)
			}
			s.mu.Unlock()
			if found {
				s.say("nf %s/%s %s", f[1], f[2], b)
			} else {
				s.say("nf %s/%s absent", f[1], f[2])
			}
		}
	default:
		return false
	}
	return true
}

// Set (KEY=VALUE) or remove (KEY-) one of spec.labels of the object at key, if it exists.
func (s *server) nfLabel(key, kv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, found := nf.objs[key]
	if !found {
		return
	}
	o = nfCopy(o)
	spec, _ := o["spec"].(map[string]interface{})
	if spec == nil {
		spec = map[string]interface{}{}
		o["spec"] = spec
	}
	labels, _ := spec["labels"].(map[string]interface{})
	if labels == nil {
		labels = map[string]interface{}{}
		spec["labels"] = labels
	}
	if p := strings.SplitN(kv, "=", 2); len(p) == 2 {
		labels[p[0]] = p[1]
	} else {
		delete(labels, strings.TrimSuffix(kv, "-"))
	}
	s.nfPut(key, o, "MODIFIED")
}
