// ResourceSlices (resource.k8s.io/v1, cluster-scoped) for the DRA publisher's tests:
// create (name or generateName), get, update at a resourceVersion (409 when stale),
// delete, list and watch with the field selectors a 1.34 API server supports for them
// (spec.nodeName, spec.driver; anything else is refused as it refuses it). Every write is
// checked against the 1.34.9 API server's validation rules (written here a second time,
// from its messages, independently of the plugin's C copy) and refused with 422 and the
// same message. Device taints are dropped silently, as with DRADeviceTaints off, unless
// switched on (then timeAdded is filled in). What a peer, an operator or the kubelet
// does comes on stdin:
//
//	rs-taints on|off     the DRADeviceTaints gate
//	rs-delete NAME|all   delete one slice, or every slice (the kubelet's wipe at its start)
//	rs-fail N CODE       answer the next N writes (POST, PUT, DELETE) with HTTP CODE
//	rs-modify NAME       someone else changes the first device's productName
//	rs-add NAME NODE DRIVER  a slice someone else wrote (one device "other-0")
//	rs-dump              says "rs NAME JSON" per slice, then "rs-count N"
//	rs-partitionable on|off  the DRAPartitionableDevices gate (on by default): off drops
//	                     spec.sharedCounters and devices' consumesCounters silently on write,
//	                     as a 1.34 API server does, unless the stored slice already uses them
//	version GITVERSION   what GET /version says (default v1.34.9); from v1.35.0 on a slice
//	                     with both sharedCounters and devices is refused (1.35's rule)
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

const rsPath = "/apis/resource.k8s.io/v1/resourceslices"

type rsWatcher struct {
	ch chan nfEvent
}

// Guarded by the server's mu.
var rs = struct {
	objs     map[string]map[string]interface{}
	history  []nfEvent
	watchers map[*rsWatcher]bool
	taints   bool
	fail     int
	failCode int
	names    int
	// DRAPartitionableDevices off: counters dropped on write
	noPartitions bool
	version      string
}{objs: map[string]map[string]interface{}{}, watchers: map[*rsWatcher]bool{}, version: "v1.34.9"}

func init() {
	routes = append(routes, rsRoute, versionRoute)
	commands = append(commands, rsCommand, versionCommand, watchListCommand)
}

// ---- GET /version (what the plugin's publisher reads to choose the counters' layout) ----

func versionRoute(s *server, w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/version" {
		return false
	}
	if r.Method != "GET" {
		status(w, 405, "MethodNotAllowed", "method not allowed")
		return true
	}
	s.mu.Lock()
	v := rs.version
	s.mu.Unlock()
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	nfJSON(w, 200, map[string]interface{}{"major": major, "minor": minor, "gitVersion": v,
		"gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
		"buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0", "compiler": "gc",
		"platform": "linux/amd64"})
	return true
}

func versionCommand(s *server, f []string) bool {
	if len(f) != 2 || f[0] != "version" {
		return false
	}
	s.mu.Lock()
	rs.version = f[1]
	s.mu.Unlock()
	return true
}

// What the API server keeps of partitionable devices: everything with the gate on; with it
// off nothing (sharedCounters, consumesCounters) unless old, the stored slice, uses them.
func rsPartitions(o, old map[string]interface{}) {
	if !rs.noPartitions || rsUsesPartitions(old) {
		return
	}
	spec, _ := o["spec"].(map[string]interface{})
	delete(spec, "sharedCounters")
	devices, _ := spec["devices"].([]interface{})
	for _, di := range devices {
		if d, _ := di.(map[string]interface{}); d != nil {
			delete(d, "consumesCounters")
		}
	}
}

func rsUsesPartitions(o map[string]interface{}) bool {
	spec, _ := o["spec"].(map[string]interface{})
	if spec == nil {
		return false
	}
	if spec["sharedCounters"] != nil {
		return true
	}
	devices, _ := spec["devices"].([]interface{})
	for _, di := range devices {
		if d, _ := di.(map[string]interface{}); d != nil && d["consumesCounters"] != nil {
			return true
		}
	}
	return false
}

// ---- store ----

// What the API server stores of the taints: nothing with the gate off, timeAdded filled
// in with it on.
func (s *server) rsTaints(o map[string]interface{}) {
	spec, _ := o["spec"].(map[string]interface{})
	devices, _ := spec["devices"].([]interface{})
	for _, di := range devices {
		d, _ := di.(map[string]interface{})
		if !rs.taints {
			delete(d, "taints")
			continue
		}
		taints, _ := d["taints"].([]interface{})
		for _, ti := range taints {
			if t, _ := ti.(map[string]interface{}); t != nil && t["timeAdded"] == nil {
				t["timeAdded"] = time.Now().UTC().Format(time.RFC3339)
			}
		}
	}
}

// The event carries o as encoded now (o may change later: a DELETE sets its
// resourceVersion); its map only answers the field selector (spec, which never changes).
func (s *server) rsRecord(typ string, o map[string]interface{}) {
	raw, _ := json.Marshal(o)
	e := nfEvent{rv: s.rv, typ: typ, obj: o, raw: raw}
	rs.history = append(rs.history, e)
	for w := range rs.watchers {
		select {
		case w.ch <- e:
		default:
		}
	}
}

func (s *server) rsPut(name string, o map[string]interface{}, typ string) {
	s.rv++
	md := nfMeta(o)
	md["name"] = name
	md["resourceVersion"] = strconv.Itoa(s.rv)
	if _, ok := md["uid"]; !ok {
		md["uid"] = fmt.Sprintf("rs-uid-%d", s.rv)
	}
	o["kind"] = "ResourceSlice"
	o["apiVersion"] = "resource.k8s.io/v1"
	rs.objs[name] = o
	s.rsRecord(typ, o)
}

func (s *server) rsDelete(name string) bool {
	o, ok := rs.objs[name]
	if !ok {
		return false
	}
	delete(rs.objs, name)
	s.rv++
	nfMeta(o)["resourceVersion"] = strconv.Itoa(s.rv)
	s.rsRecord("DELETED", o)
	return true
}

// The field selector as the API server takes it for ResourceSlices: "" ok, else terms
// spec.nodeName=X and spec.driver=Y joined by commas.
func rsSelector(sel string) (map[string]string, string) {
	terms := map[string]string{}
	if sel == "" {
		return terms, ""
	}
	for _, t := range strings.Split(sel, ",") {
		kv := strings.SplitN(t, "=", 2)
		if len(kv) != 2 || (kv[0] != "spec.nodeName" && kv[0] != "spec.driver") {
			return nil, fmt.Sprintf("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: %s", kv[0])
		}
		terms[kv[0]] = kv[1]
	}
	return terms, ""
}

func rsMatches(terms map[string]string, o map[string]interface{}) bool {
	spec, _ := o["spec"].(map[string]interface{})
	if v, ok := terms["spec.nodeName"]; ok && spec["nodeName"] != v {
		return false
	}
	if v, ok := terms["spec.driver"]; ok && spec["driver"] != v {
		return false
	}
	return true
}

func rsInvalid(w http.ResponseWriter, msg, name string) {
	nfJSON(w, 422, map[string]interface{}{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": msg, "reason": "Invalid", "code": 422,
		"details": map[string]interface{}{"name": name, "group": "resource.k8s.io", "kind": "ResourceSlice"}})
}

// A write answered with the failure asked for by rs-fail, if any.
func rsFailing(w http.ResponseWriter) bool {
	if rs.fail <= 0 {
		return false
	}
	rs.fail--
	status(w, rs.failCode, "InternalError", "injected failure")
	return true
}

func rsRoute(s *server, w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if p != rsPath && !strings.HasPrefix(p, rsPath+"/") {
		return false
	}
	if p == rsPath {
		switch r.Method {
		case "GET":
			terms, bad := rsSelector(r.URL.Query().Get("fieldSelector"))
			if bad != "" {
				status(w, 400, "BadRequest", bad)
			} else if r.URL.Query().Get("watch") != "" {
				s.rsWatch(w, r, terms)
			} else {
				s.rsList(w, terms)
			}
		case "POST":
			s.rsCreate(w, r)
		default:
			status(w, 405, "MethodNotAllowed", "method not allowed")
		}
		return true
	}
	name := strings.TrimPrefix(p, rsPath+"/")
	notFound := fmt.Sprintf(`resourceslices.resource.k8s.io "%s" not found`, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	o, found := rs.objs[name]
	switch r.Method {
	case "GET":
		if !found {
			status(w, 404, "NotFound", notFound)
			return true
		}
		nfJSON(w, 200, o)
	case "PUT":
		var in map[string]interface{}
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&in); err != nil {
			status(w, 400, "BadRequest", err.Error())
			return true
		}
		if rsFailing(w) {
			return true
		}
		if !found {
			status(w, 404, "NotFound", notFound)
			return true
		}
		if want, _ := nfMeta(in)["resourceVersion"].(string); want != nfMeta(o)["resourceVersion"] {
			status(w, 409, "Conflict", fmt.Sprintf(`Operation cannot be fulfilled on resourceslices.resource.k8s.io "%s": the object has been modified; please apply your changes to the latest version and try again`, name))
			return true
		}
		rsPartitions(in, o)
		if msg := rsValidate(in, name); msg != "" {
			rsInvalid(w, msg, name)
			return true
		}
		nfMeta(in)["uid"] = nfMeta(o)["uid"]
		s.rsTaints(in)
		s.rsPut(name, in, "MODIFIED")
		nfJSON(w, 200, in)
	case "DELETE":
		if rsFailing(w) {
			return true
		}
		if !s.rsDelete(name) {
			status(w, 404, "NotFound", notFound)
			return true
		}
		nfJSON(w, 200, map[string]interface{}{"kind": "Status", "apiVersion": "v1", "status": "Success"})
	default:
		status(w, 405, "MethodNotAllowed", "method not allowed")
	}
	return true
}

func (s *server) rsCreate(w http.ResponseWriter, r *http.Request) {
	var in map[string]interface{}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&in); err != nil {
		status(w, 400, "BadRequest", err.Error())
		return
	}
	s.mu.Lock()
	unlock := true
	defer func() {
		if unlock {
			s.mu.Unlock()
		}
	}()
	if rsFailing(w) {
		return
	}
	md := nfMeta(in)
	name, _ := md["name"].(string)
	if gen, _ := md["generateName"].(string); name == "" && gen != "" {
		rs.names++
		name = fmt.Sprintf("%sx%04d", gen, rs.names)
	}
	if _, found := rs.objs[name]; found {
		status(w, 409, "AlreadyExists", fmt.Sprintf(`resourceslices.resource.k8s.io "%s" already exists`, name))
		return
	}
	rsPartitions(in, nil)
	if msg := rsValidate(in, name); msg != "" {
		rsInvalid(w, msg, name)
		return
	}
	s.rsTaints(in)
	s.rsPut(name, in, "ADDED")
	// answered with the event's encoding, written outside the lock (a real API server
	// handles writes side by side; this one held every other request while writing)
	raw := rs.history[len(rs.history)-1].raw
	unlock = false
	s.mu.Unlock()
	nfJSON(w, 201, raw)
}

func (s *server) rsList(w http.ResponseWriter, terms map[string]string) {
	s.mu.Lock()
	items := []interface{}{}
	for _, o := range rs.objs {
		if rsMatches(terms, o) {
			items = append(items, o)
		}
	}
	l := map[string]interface{}{"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
		"items": items, "metadata": map[string]interface{}{"resourceVersion": strconv.Itoa(s.rv)}}
	b, _ := json.Marshal(l)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *server) rsWatch(w http.ResponseWriter, r *http.Request, terms map[string]string) {
	q := r.URL.Query()
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
	wt := &rsWatcher{ch: make(chan nfEvent, 1000)}
	s.mu.Lock()
	initial, ok := watchListAsked(w, r)
	if !ok {
		s.mu.Unlock()
		return
	}
	if initial {
		for _, o := range rs.objs {
			if rsMatches(terms, o) {
				wt.ch <- nfEvent{typ: "ADDED", obj: o}
			}
		}
		wt.ch <- nfEvent{typ: "BOOKMARK", obj: initialEventsEnd("ResourceSlice", "resource.k8s.io/v1", s.rv)}
		from = s.rv
	}
	for _, e := range rs.history {
		if e.rv > from {
			wt.ch <- e
		}
	}
	rs.watchers[wt] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(rs.watchers, wt)
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
			if e.typ != "BOOKMARK" && !rsMatches(terms, e.obj) {
				continue
			}
			enc.Encode(watchEvent{e.typ, e.object()})
			w.(http.Flusher).Flush()
		case <-end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func rsCommand(s *server, f []string) bool {
	if len(f) < 1 || !strings.HasPrefix(f[0], "rs-") {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f[0] {
	case "rs-taints":
		rs.taints = len(f) > 1 && f[1] == "on"
	case "rs-partitionable":
		rs.noPartitions = len(f) > 1 && f[1] == "off"
	case "rs-delete":
		if len(f) > 1 && f[1] == "all" {
			for name := range rs.objs {
				s.rsDelete(name)
			}
		} else if len(f) > 1 {
			s.rsDelete(f[1])
		}
	case "rs-fail":
		if len(f) > 2 {
			rs.fail, _ = strconv.Atoi(f[1])
			rs.failCode, _ = strconv.Atoi(f[2])
		}
	case "rs-modify":
		if len(f) < 2 {
			break
		}
		if o, ok := rs.objs[f[1]]; ok {
			o = nfCopy(o)
			spec, _ := o["spec"].(map[string]interface{})
			devices, _ := spec["devices"].([]interface{})
			if len(devices) > 0 {
				d, _ := devices[0].(map[string]interface{})
				attrs, _ := d["attributes"].(map[string]interface{})
				if attrs == nil {
					attrs = map[string]interface{}{}
					d["attributes"] = attrs
				}
				attrs["productName"] = map[string]interface{}{"string": "changed by someone"}
			}
			s.rsPut(f[1], o, "MODIFIED")
		}
	case "rs-add":
		if len(f) > 3 {
			o := map[string]interface{}{"metadata": map[string]interface{}{}, "spec": map[string]interface{}{
				"driver": f[3], "nodeName": f[2],
				"pool":    map[string]interface{}{"name": f[2], "generation": 1, "resourceSliceCount": 1},
				"devices": []interface{}{map[string]interface{}{"name": "other-0"}}}}
			s.rsPut(f[1], nfCopy(o), "ADDED")
		}
	case "rs-dump":
		names := []string{}
		for name := range rs.objs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			b, _ := json.Marshal(rs.objs[name])
			s.say("rs %s %s", name, b)
		}
		s.say("rs-count %d", len(names))
	default:
		return false
	}
	return true
}
