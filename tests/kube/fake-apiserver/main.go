// A fake Kubernetes API server for the API client's deterministic tests: TLS with HTTP/2
// (net/http + crypto/tls) under a CA made for this run, a small Node store with
// resourceVersions, list and watch (bookmarks, 410 Gone as HTTP status or ERROR event),
// labels set on command, and faults on command: 403 with a Status body, a handler that never answers, oversize
// bodies, token rotation, dropped connections, a stopped or restarted listener.
//
// usage: fake-apiserver DIR   (writes DIR/ca.crt, DIR/client.crt, DIR/client.key)
// stdout: "h2c PORT" (plain HTTP/2), "listening PORT" (TLS), then one "req METHOD URI AUTH" line per request
// (and "patch NAME BODY" per Node PATCH) and "ok" per command. stdin: one command per line (see command()).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

type event struct {
	rv   int
	typ  string
	node map[string]interface{}
	// A hostile server's event: sent whatever the watch's field selector says.
	raw bool
	// Bookmarks: told when this watcher has written and flushed the event, so that the
	// command's "ok" comes after the bytes are on the connection (a request answered
	// afterwards on another stream then arrives after them).
	sent chan<- struct{}
}

type server struct {
	mu        sync.Mutex
	rv        int
	nodes     map[string]map[string]interface{}
	labels    map[string]map[string]string // node -> its labels (kept across modify)
	history   []event
	compacted int // watches from an RV below this get 410
	gone410   string
	muted     bool // watch streams send nothing (a silent, half-dead server)
	tokens    map[string]bool
	forbid    map[string]bool   // HTTP methods answered 403; "WATCH": list and watch of nodes
	uids      map[string]string // a recreated Node's UID
	watchers  map[chan event]bool
	conns     map[net.Conn]bool
	listener  net.Listener
	srv       *http.Server
	port      int
	tlsConf   *tls.Config
	out       *sync.Mutex
}

func (s *server) say(format string, a ...interface{}) {
	s.out.Lock()
	fmt.Printf(format+"\n", a...)
	s.out.Unlock()
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]interface{}{
		"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": msg, "reason": reason, "code": code,
	})
}

func (s *server) list(sel string) map[string]interface{} {
	items := []interface{}{}
	for name, n := range s.nodes {
		if sel == "" || sel == "metadata.name="+name {
			items = append(items, n)
		}
	}
	return map[string]interface{}{
		"kind": "NodeList", "apiVersion": "v1", "items": items,
		"metadata": map[string]interface{}{"resourceVersion": strconv.Itoa(s.rv)},
	}
}

func matches(sel string, n map[string]interface{}) bool {
	if sel == "" {
		return true
	}
	md := n["metadata"].(map[string]interface{})
	return sel == "metadata.name="+md["name"].(string)
}

func (s *server) watch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, _ := strconv.Atoi(q.Get("resourceVersion"))
	sel := q.Get("fieldSelector")
	timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
	s.mu.Lock()
	initial, ok := watchListAsked(w, r)
	if !ok {
		s.mu.Unlock()
		return
	}
	if !initial && from < s.compacted {
		mode := s.gone410
		s.mu.Unlock()
		if mode == "http" {
			status(w, 410, "Expired", "too old resource version")
			return
		}
		w.WriteHeader(200)
		json.NewEncoder(w).Encode(map[string]interface{}{"type": "ERROR", "object": map[string]interface{}{
			"kind": "Status", "apiVersion": "v1", "status": "Failure",
			"message": "too old resource version", "reason": "Expired", "code": 410}})
		return
	}
	ch := make(chan event, 1000)
	if initial {
		for _, n := range s.nodes {
			if matches(sel, n) {
				ch <- event{typ: "ADDED", node: n}
			}
		}
		ch <- event{typ: "BOOKMARK", node: initialEventsEnd("Node", "v1", s.rv)}
		from = s.rv
	}
	for _, e := range s.history {
		if e.rv > from {
			ch <- e
		}
	}
	s.watchers[ch] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
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
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		// Muted: events wait in the channel (nothing is lost, nothing is sent).
		s.mu.Lock()
		in := ch
		if s.muted {
			in = nil
		}
		s.mu.Unlock()
		select {
		case <-tick.C:
			continue
		case e := <-in:
			if e.typ != "BOOKMARK" && !e.raw && !matches(sel, e.node) {
				continue
			}
			enc.Encode(watchEvent{e.typ, e.node})
			w.(http.Flusher).Flush()
			if e.sent != nil {
				e.sent <- struct{}{}
			}
		case <-end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	who := auth
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		who = "cert:" + r.TLS.PeerCertificates[0].Subject.CommonName
	}
	s.say("req %s %s %s ua=%s ct=%s proto=%s", r.Method, r.URL.RequestURI(), who,
		r.Header.Get("User-Agent"), r.Header.Get("Content-Type"), r.Proto)
	s.mu.Lock()
	ok := strings.HasPrefix(who, "cert:") || s.tokens[strings.TrimPrefix(auth, "Bearer ")]
	forbidden := s.forbid[r.Method] || (s.forbid["WATCH"] && r.Method == "GET" && r.URL.Path == "/api/v1/nodes")
	s.mu.Unlock()
	if !ok {
		status(w, 401, "Unauthorized", "Unauthorized")
		return
	}
	if forbidden {
		status(w, 403, "Forbidden", fmt.Sprintf(`nodes is forbidden: User "test" cannot %s resource "nodes" in API group "" at the cluster scope`, strings.ToLower(r.Method)))
		return
	}
	p := r.URL.Path
	switch {
	case p == "/hang":
		<-r.Context().Done()
		return
	case p == "/big":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"pad":"%s"}`, strings.Repeat("x", n))
		return
	case p == "/api/v1/nodes" && r.Method == "GET":
		if r.URL.Query().Get("watch") != "" {
			s.watch(w, r)
			return
		}
		s.mu.Lock()
		l := s.list(r.URL.Query().Get("fieldSelector"))
		s.mu.Unlock()
		json.NewEncoder(w).Encode(l)
		return
	case strings.HasPrefix(p, "/api/v1/nodes/"):
		name := strings.TrimPrefix(p, "/api/v1/nodes/")
		if r.Method == "PATCH" {
			// The body on a line of its own ("patch NAME BODY"), for tests of what a
			// patch says; the stored Node is not merged with it.
			b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			s.say("patch %s %s", name, strings.ReplaceAll(string(b), "\n", " "))
		}
		s.mu.Lock()
		n, found := s.nodes[name]
		var body []byte
		if found {
			if r.Method == "PATCH" {
				s.modify(name)
			}
			body, _ = json.Marshal(n)
		}
		s.mu.Unlock()
		if !found {
			status(w, 404, "NotFound", fmt.Sprintf(`nodes "%s" not found`, name))
			return
		}
		w.Write(body)
		return
	}
	for _, route := range routes {
		if route(s, w, r) {
			return
		}
	}
	status(w, 404, "NotFound", "the server could not find the requested resource")
}

// Extensions in other files of this package (one file per API resource a test needs):
// a route answers a request it recognises and returns true; a command handles a stdin
// command word and returns true ("ok WORD" is said after it, as for the built-in ones).
// Each file registers its own from init().
var (
	routes   []func(s *server, w http.ResponseWriter, r *http.Request) bool
	commands []func(s *server, f []string) bool
)

func (s *server) record(typ string, n map[string]interface{}) {
	e := event{rv: s.rv, typ: typ, node: n}
	s.history = append(s.history, e)
	for ch := range s.watchers {
		select {
		case ch <- e:
		default:
		}
	}
}

func (s *server) node(name string) map[string]interface{} {
	md := map[string]interface{}{
		"name": name, "resourceVersion": strconv.Itoa(s.rv), "uid": "uid-" + name}
	if u := s.uids[name]; u != "" {
		md["uid"] = u
	}
	if l := s.labels[name]; len(l) > 0 {
		labels := map[string]interface{}{}
		for k, v := range l {
			labels[k] = v
		}
		md["labels"] = labels
	}
	// What a real Node also carries, and a watch has no reason to keep.
	md["managedFields"] = []interface{}{map[string]interface{}{"manager": "kubelet", "operation": "Update"}}
	return map[string]interface{}{"kind": "Node", "apiVersion": "v1", "metadata": md,
		"status": map[string]interface{}{"images": []interface{}{map[string]interface{}{
			"names": []string{"registry.example/cuda:12.4"}, "sizeBytes": 1 << 30}}}}
}

func (s *server) modify(name string) {
	s.rv++
	n := s.node(name)
	s.nodes[name] = n
	s.record("MODIFIED", n)
}

func (s *server) serve() {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
	if err != nil {
		panic(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	tl := tls.NewListener(l, s.tlsConf)
	srv := &http.Server{Handler: s, TLSConfig: s.tlsConf,
		ConnState: func(c net.Conn, st http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if st == http.StateNew {
				s.conns[c] = true
			} else if st == http.StateClosed || st == http.StateHijacked {
				delete(s.conns, c)
			}
		}}
	s.listener = l
	s.srv = srv
	go srv.Serve(tl)
}

// Close the listener and every connection (the process and its state stay).
func (s *server) stop() {
	s.listener.Close()
	s.dropConns()
}

func (s *server) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *server) command(line string) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	arg := ""
	if len(f) > 1 {
		arg = f[1]
	}
	switch f[0] {
	case "recreate":
		// The Node deleted and created again: a new UID (what owns its objects changes).
		s.mu.Lock()
		s.rv++
		s.record("DELETED", s.node(arg))
		s.rv++
		s.uids[arg] = fmt.Sprintf("uid-%s-%d", arg, s.rv)
		n := s.node(arg)
		s.nodes[arg] = n
		s.record("ADDED", n)
		s.mu.Unlock()
	case "add", "modify", "delete", "vanish":
		s.mu.Lock()
		switch f[0] {
		case "add":
			s.rv++
			n := s.node(arg)
			s.nodes[arg] = n
			s.record("ADDED", n)
		case "modify":
			s.modify(arg)
		case "delete":
			s.rv++
			n := s.node(arg)
			delete(s.nodes, arg)
			s.record("DELETED", n)
		case "vanish":
			// Gone without a watch event, and the history compacted past it: only a
			// relist can tell.
			s.rv++
			delete(s.nodes, arg)
			s.history = nil
			s.compacted = s.rv + 1
		}
		s.mu.Unlock()
	case "label":
		// label NODE KEY=VALUE sets, label NODE KEY- removes (kubectl's syntax); a
		// MODIFIED event when the node exists.
		s.mu.Lock()
		if len(f) > 2 {
			if s.labels[arg] == nil {
				s.labels[arg] = map[string]string{}
			}
			if kv := strings.SplitN(f[2], "=", 2); len(kv) == 2 {
				s.labels[arg][kv[0]] = kv[1]
			} else {
				delete(s.labels[arg], strings.TrimSuffix(f[2], "-"))
			}
			if _, found := s.nodes[arg]; found {
				s.modify(arg)
			}
		}
		s.mu.Unlock()
	case "inject":
		// inject TYPE NAME [KEY=VALUE]: one event for a Node NAME (with that label) to
		// every watch, its field selector ignored, the store untouched (a hostile server).
		s.mu.Lock()
		if len(f) > 2 {
			s.rv++
			save := s.labels[f[2]]
			s.labels[f[2]] = map[string]string{}
			if len(f) > 3 {
				if kv := strings.SplitN(f[3], "=", 2); len(kv) == 2 {
					s.labels[f[2]][kv[0]] = kv[1]
				}
			}
			n := s.node(f[2])
			s.labels[f[2]] = save
			for ch := range s.watchers {
				select {
				case ch <- event{rv: s.rv, typ: f[1], node: n, raw: true}:
				default:
				}
			}
		}
		s.mu.Unlock()
	case "flood":
		// flood N PREFIX: N ADDED events for Nodes PREFIX-0 ... to every watch, field
		// selector ignored, none dropped; "ok" once the last is on the wire (or 120 s).
		count, _ := strconv.Atoi(arg)
		prefix := "other"
		if len(f) > 2 {
			prefix = f[2]
		}
		s.mu.Lock()
		chans := []chan event{}
		for ch := range s.watchers {
			chans = append(chans, ch)
		}
		s.mu.Unlock()
		deadline := time.After(120 * time.Second)
		sent := make(chan struct{}, len(chans))
	flood:
		for i := 0; i < count; i++ {
			s.mu.Lock()
			s.rv++
			n := s.node(fmt.Sprintf("%s-%d", prefix, i))
			rv := s.rv
			s.mu.Unlock()
			e := event{rv: rv, typ: "ADDED", node: n, raw: true}
			if i == count-1 {
				e.sent = sent
			}
			for _, ch := range chans {
				select {
				case ch <- e:
				case <-deadline:
					break flood
				}
			}
		}
		for range chans {
			select {
			case <-sent:
			case <-deadline:
			}
		}
	case "compact":
		s.mu.Lock()
		s.history = nil
		s.compacted = s.rv + 1
		s.mu.Unlock()
	case "mute", "unmute":
		s.mu.Lock()
		s.muted = f[0] == "mute"
		s.mu.Unlock()
	case "gone410":
		s.mu.Lock()
		s.gone410 = arg
		s.mu.Unlock()
	case "bookmark":
		s.mu.Lock()
		s.rv++
		sent := make(chan struct{}, len(s.watchers))
		e := event{rv: s.rv, typ: "BOOKMARK", node: map[string]interface{}{"kind": "Node",
			"apiVersion": "v1", "metadata": map[string]interface{}{"resourceVersion": strconv.Itoa(s.rv)}},
			sent: sent}
		n := len(s.watchers)
		for ch := range s.watchers {
			ch <- e
		}
		s.mu.Unlock()
		// Bounded: a muted or ended watcher never writes it.
		func() {
			timeout := time.After(5 * time.Second)
			for i := 0; i < n; i++ {
				select {
				case <-sent:
				case <-timeout:
					return
				}
			}
		}()
	case "tokens":
		s.mu.Lock()
		s.tokens = map[string]bool{}
		for _, t := range strings.Split(arg, ",") {
			s.tokens[t] = true
		}
		s.mu.Unlock()
	case "forbid":
		s.mu.Lock()
		s.forbid[arg] = true
		s.mu.Unlock()
	case "drop":
		s.dropConns()
	case "stop":
		s.stop()
	case "shutdown":
		// Graceful, as kube-apiserver on SIGTERM: GOAWAY, then wait (without a limit)
		// for the streams in flight to end.
		s.srv.Shutdown(context.Background())
	case "start":
		s.serve()
	default:
		for _, cmd := range commands {
			if cmd(s, f) {
				break
			}
		}
	}
	s.say("ok %s", f[0])
}

func main() {
	dir := os.Args[1]
	cert := makeCerts(dir)
	caPem, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPem)
	s := &server{
		nodes: map[string]map[string]interface{}{}, labels: map[string]map[string]string{},
		tokens: map[string]bool{"tok1": true},
		forbid: map[string]bool{}, uids: map[string]string{}, watchers: map[chan event]bool{}, conns: map[net.Conn]bool{},
		out: &sync.Mutex{}, rv: 100,
		tlsConf: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool},
	}
	s.serve()
	// Plain HTTP/2 with prior knowledge (h2c) on a second port: same handler.
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go (&http.Server{Handler: h2c.NewHandler(s, &http2.Server{})}).Serve(hl)
	s.say("h2c %d", hl.Addr().(*net.TCPAddr).Port)
	s.say("listening %d", s.port)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		s.command(in.Text())
	}
}
